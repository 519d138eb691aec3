package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/internal/reqcount"
	"github.com/kuberetry/retry/integration/internal/testserver"
)

const (
	// quotaWriters create ConfigMaps at once, half through each apiserver.
	quotaWriters = 32
	// quotaRounds is how many ConfigMaps each writer creates in each way.
	quotaRounds = 20
)

// testQuotaTwoAPIServers runs two kube-apiservers on one etcd prefix, an
// HA control plane, and a ResourceQuota in the namespace, whose status
// the test sets (no quota controller runs). Then 32 writers, half through
// each apiserver, each create 20 ConfigMaps in each of three ways in the
// same run: client-go's plain Create, Ensure and CreateOrUpdate. The
// quota admission of each apiserver updates the quota's status on every
// create, and a create whose admission loses that race to the other
// apiserver's is refused with a 409 Conflict on resourcequotas. Every
// Ensure and CreateOrUpdate call must return nil (they retry that
// Conflict); the plain creates' 409s are counted beside them, and each
// must be one IsTransient accepts.
func testQuotaTwoAPIServers(t *testing.T, first *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	second := startFaultServer(t, testserver.Options{Prefix: first.Prefix})
	servers := []*testserver.Server{first, second}
	ns := createNamespace(t, first, "quota-")

	quotas := first.Client.CoreV1().ResourceQuotas(ns)
	hard := corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("100000")}
	q, err := quotas.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the quota controller would set; admission refuses every create
	// in the namespace while the status is unknown.
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}
	if _, err := quotas.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until each apiserver's quota admission has seen the quota, its
	// creates pass without counting: probe each until its create counts.
	used := func() int64 {
		q, err := quotas.Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := q.Status.Used[corev1.ResourceConfigMaps]
		return u.Value()
	}
	probes := 0
	for i, s := range servers {
		counted := false
		for n := 0; !counted; n++ {
			if n == 100 {
				t.Fatalf("apiserver %d: 100 creates, and its quota admission counted none", i)
			}
			was := used()
			if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d-%d", i, n)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			probes++
			if counted = used() > was; !counted {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	var wires [2]reqcount.Counter
	var cms [2]corev1client.ConfigMapInterface
	for i, s := range servers {
		client, err := kubernetes.NewForConfig(wires[i].Config(s.Config))
		if err != nil {
			t.Fatal(err)
		}
		cms[i] = client.CoreV1().ConfigMaps(ns)
	}

	var mu sync.Mutex
	var plain, ensure, createOrUpdate quotaTally
	var firstErrs []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(firstErrs) < 5 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range quotaWriters {
		wg.Go(func() {
			c := cms[w%2]
			<-start
			for r := range quotaRounds {
				name := func(kind string) string { return fmt.Sprintf("%s-%02d-%02d", kind, w, r) }
				data := map[string]string{"writer": fmt.Sprint(w)}

				_, err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("plain")}, Data: data}, metav1.CreateOptions{})
				plain.add(&mu, err, 0)
				if err != nil && !isQuotaConflict(err) {
					fail("plain create %s: %v", name("plain"), err)
				}

				var retried int
				onRetry := retry.WithOnRetry(func(e retry.RetryEvent) {
					if isQuotaConflict(e.Err) {
						retried++
					}
				})
				mutate := func(cm *corev1.ConfigMap) error { cm.Data = data; return nil }
				desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("ensure"), Namespace: ns}}
				_, res, err := retry.Ensure(ctx, retry.DefaultRetry, c, desired, mutate, onRetry)
				ensure.add(&mu, err, retried)
				if err != nil || res != retry.ResultCreated {
					fail("Ensure %s: %s, %v", desired.Name, res, err)
				}

				retried = 0
				desired = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("cou"), Namespace: ns}}
				_, res, err = retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired,
					func(ctx context.Context) (*corev1.ConfigMap, error) {
						return c.Get(ctx, desired.Name, metav1.GetOptions{})
					},
					mutate,
					func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
						return c.Create(ctx, cm, metav1.CreateOptions{})
					},
					func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
						return c.Update(ctx, cm, metav1.UpdateOptions{})
					}, onRetry)
				createOrUpdate.add(&mu, err, retried)
				if err != nil || res != retry.ResultCreated {
					fail("CreateOrUpdate %s: %s, %v", desired.Name, res, err)
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	calls := quotaWriters * quotaRounds
	t.Logf("%d writers through 2 kube-apiservers on one etcd prefix, a ResourceQuota in the namespace, %d creates of each kind in %v:\n"+
		"  client-go Create: %d of %d returned 409 (every one IsTransient: %v)\n"+
		"  retry.Ensure: %d of %d failed; quota Conflicts retried %d\n"+
		"  retry.CreateOrUpdate: %d of %d failed; quota Conflicts retried %d\n"+
		"  on the wire, apiserver 1: %s\n  on the wire, apiserver 2: %s",
		quotaWriters, calls, took.Round(100*time.Millisecond),
		plain.conflicts, calls, plain.transient == plain.conflicts,
		ensure.failed, calls, ensure.retried,
		createOrUpdate.failed, calls, createOrUpdate.retried,
		wires[0].Outcomes(), wires[1].Outcomes())
	for _, e := range firstErrs {
		t.Error(e)
	}
	if ensure.failed+createOrUpdate.failed != 0 {
		t.Errorf("%d Ensure and %d CreateOrUpdate calls failed, want none", ensure.failed, createOrUpdate.failed)
	}
	if plain.transient != plain.conflicts {
		t.Errorf("%d of the plain creates' %d quota Conflicts are not IsTransient", plain.conflicts-plain.transient, plain.conflicts)
	}
	if plain.conflicts+ensure.retried+createOrUpdate.retried == 0 {
		t.Error("no create met the quota admission's race: the test proves nothing")
	}
	onWire := wires[0].Outcomes().Status("create", "configmaps", 409) + wires[1].Outcomes().Status("create", "configmaps", 409)
	if want := plain.conflicts + ensure.retried + createOrUpdate.retried; onWire != want {
		t.Errorf("%d creates answered 409 on the wire, but the callers met %d", onWire, want)
	}
	list, err := first.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := probes + 3*calls - plain.conflicts; len(list.Items) != want {
		t.Errorf("%d ConfigMaps in the namespace, want %d: %d probes and every create that returned nil", len(list.Items), want, probes)
	}
}

// quotaTally counts the outcomes of one kind of create.
type quotaTally struct {
	conflicts, transient, failed, retried int
}

func (q *quotaTally) add(mu *sync.Mutex, err error, retried int) {
	mu.Lock()
	defer mu.Unlock()
	q.retried += retried
	if err == nil {
		return
	}
	q.failed++
	if isQuotaConflict(err) {
		q.conflicts++
		if retry.IsTransient(err) {
			q.transient++
		}
	}
}

// isQuotaConflict reports whether err is a 409 Conflict whose details
// name the resourcequotas, as the quota admission returns it.
func isQuotaConflict(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "resourcequotas" && d.Group == ""
}

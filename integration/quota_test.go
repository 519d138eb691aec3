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
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/ha"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

const (
	// quotaWriters create ConfigMaps at once, half through each apiserver.
	quotaWriters = 32
	// quotaRounds is how many ConfigMaps each writer creates in each way.
	quotaRounds = 20
)

// quotaBackoff is the backoff of the Ensure and CreateOrUpdate calls that
// must all succeed. Every create in the namespace writes the one
// ResourceQuota's status, so the quota is a hot object, and an apiserver
// whose quota admission reads it from a lagging watch can lose the race
// for a second or more: through the balancer, with every call on
// DefaultRetry (five attempts 10ms apart) 2 to 9 Ensure and 3 to 7
// CreateOrUpdate calls of 640 failed in each of three runs, and with
// DefaultBackoff (waits of 10ms, 50ms and 250ms) up to 14. The Ensure calls
// with DefaultRetry beside them report how often five attempts are still
// too few (less often than alone: these calls' waits slow the race).
var quotaBackoff = retry.HotObjectBackoff

// testQuotaTwoAPIServers runs two kube-apiservers on one etcd prefix, an
// HA control plane, and the quota race on them (quotaRace), half the
// writers through each apiserver directly.
func testQuotaTwoAPIServers(t *testing.T, first *testserver.Server) {
	second := startFaultServer(t, testserver.Options{Prefix: first.Prefix})
	servers := []*testserver.Server{first, second}
	quotaRace(t, servers, "half through each", func(w int) *rest.Config { return servers[w%2].Config })
}

// TestQuotaThroughBalancer runs the quota race (quotaRace) on an HA
// control plane of two kube-apiservers on a three-member etcd, each
// writer with a connection of its own through the round-robin balancer,
// so the writers spread over both apiservers as many controllers do.
func TestQuotaThroughBalancer(t *testing.T) {
	cp, err := ha.Start(testserver.BufferLogs(t), ha.Options{APIServers: 2})
	if err != nil {
		t.Fatal(err)
	}
	configs := make([]*rest.Config, quotaWriters)
	for w := range configs {
		configs[w] = cp.Config()
	}
	quotaRace(t, []*testserver.Server{cp.Server(0), cp.Server(1)}, "each its own connection through the balancer",
		func(w int) *rest.Config { return configs[w] })
	hosts, routed := cp.Balancer.Backends(), cp.Balancer.Stats().Routed
	t.Logf("the balancer sent %d and %d connections to the two apiservers", routed[hosts[0]], routed[hosts[1]])
	if routed[hosts[0]] == 0 || routed[hosts[1]] == 0 {
		t.Errorf("the writers' connections went %d and %d to the two apiservers: not spread", routed[hosts[0]], routed[hosts[1]])
	}
}

// quotaRace puts a ResourceQuota in a namespace of the apiservers servers
// (one etcd prefix), whose status the test sets (no quota controller
// runs). Then 32 writers, writer w through a client of config(w), each
// create 20 ConfigMaps in each of four ways in the same run: client-go's
// plain Create, Ensure and CreateOrUpdate with quotaBackoff, and Ensure
// with DefaultRetry. The quota admission of each apiserver updates the
// quota's status on every create, and a create whose admission loses that
// race to another apiserver's is refused with a 409 Conflict on
// resourcequotas. Every Ensure and CreateOrUpdate call with quotaBackoff
// must return nil (they retry that Conflict); the plain creates' 409s and
// the failures with DefaultRetry are counted beside them, and each plain
// 409 must be one IsTransient accepts. Every 409 on the wire must be one a
// caller met. via says how the writers reach the apiservers.
func quotaRace(t *testing.T, servers []*testserver.Server, via string, config func(w int) *rest.Config) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	first := servers[0]
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
			// The probe's create may meet the very race this test
			// measures (the quota admission's Conflict, which IsTransient
			// accepts): it is retried, as a writer's create would be.
			probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d-%d", i, n)}}
			if err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, retry.IsTransient, func(ctx context.Context) error {
				_, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			probes++
			if counted = used() > was; !counted {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	var wire reqcount.Counter
	cms := make([]corev1client.ConfigMapInterface, quotaWriters)
	for w := range cms {
		client, err := kubernetes.NewForConfig(wire.Config(config(w)))
		if err != nil {
			t.Fatal(err)
		}
		cms[w] = client.CoreV1().ConfigMaps(ns)
	}

	var mu sync.Mutex
	var plain, ensure, createOrUpdate, ensureDefault quotaTally
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
			c := cms[w]
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
				_, res, err := retry.Ensure(ctx, quotaBackoff, c, desired, mutate, onRetry)
				ensure.add(&mu, err, retried)
				if err != nil || res != retry.ResultCreated {
					fail("Ensure %s: %s, %v", desired.Name, res, err)
				}

				retried = 0
				desired = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("default"), Namespace: ns}}
				_, _, err = retry.Ensure(ctx, retry.DefaultRetry, c, desired, mutate, onRetry)
				ensureDefault.add(&mu, err, retried)
				if err != nil && !isQuotaConflict(err) {
					fail("Ensure with DefaultRetry %s: %v", desired.Name, err)
				}

				retried = 0
				desired = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("cou"), Namespace: ns}}
				_, res, err = retry.CreateOrUpdate(ctx, quotaBackoff, desired,
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
	t.Logf("%d writers (%s) on %d kube-apiservers on one etcd prefix, a ResourceQuota in the namespace, %d creates of each kind in %v:\n"+
		"  client-go Create: %d of %d returned 409 (every one IsTransient: %v)\n"+
		"  retry.Ensure: %d of %d failed; quota Conflicts retried %d, at most %d by one call\n"+
		"  retry.CreateOrUpdate: %d of %d failed; quota Conflicts retried %d, at most %d by one call\n"+
		"  retry.Ensure with DefaultRetry (reported only): %d of %d failed; quota Conflicts retried %d, at most %d by one call\n"+
		"  on the wire: %s",
		quotaWriters, via, len(servers), calls, took.Round(100*time.Millisecond),
		plain.conflicts, calls, plain.transient == plain.conflicts,
		ensure.failed, calls, ensure.retried, ensure.longest,
		createOrUpdate.failed, calls, createOrUpdate.retried, createOrUpdate.longest,
		ensureDefault.failed, calls, ensureDefault.retried, ensureDefault.longest,
		wire.Outcomes())
	for _, e := range firstErrs {
		t.Error(e)
	}
	if ensure.failed+createOrUpdate.failed != 0 {
		t.Errorf("%d Ensure and %d CreateOrUpdate calls failed, want none", ensure.failed, createOrUpdate.failed)
	}
	if plain.transient != plain.conflicts {
		t.Errorf("%d of the plain creates' %d quota Conflicts are not IsTransient", plain.conflicts-plain.transient, plain.conflicts)
	}
	if plain.conflicts+ensure.retried+createOrUpdate.retried+ensureDefault.retried == 0 {
		t.Error("no create met the quota admission's race: the test proves nothing")
	}
	onWire := wire.Outcomes().Status("create", "configmaps", 409)
	// Every 409 on the wire is one a caller met: retried, or returned.
	want := 0
	for _, k := range []quotaTally{plain, ensure, createOrUpdate, ensureDefault} {
		want += k.retried + k.conflicts
	}
	if onWire != want {
		t.Errorf("%d creates answered 409 on the wire, but the callers met %d", onWire, want)
	}
	list, err := first.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := plain.conflicts + ensure.conflicts + createOrUpdate.conflicts + ensureDefault.conflicts
	if want := probes + 4*calls - refused; len(list.Items) != want {
		t.Errorf("%d ConfigMaps in the namespace, want %d: %d probes and every create not refused by the quota", len(list.Items), want, probes)
	}
}

// quotaTally counts the outcomes of one kind of create.
type quotaTally struct {
	conflicts, transient, failed, retried int
	// longest is the most quota Conflicts one call retried.
	longest int
}

func (q *quotaTally) add(mu *sync.Mutex, err error, retried int) {
	mu.Lock()
	defer mu.Unlock()
	q.retried += retried
	q.longest = max(q.longest, retried)
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

package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// The Go blocks of the README and the guides that need an apiserver, but
// for the writes of docs/writes.md (everywrite_test.go) and the metrics of
// docs/metrics.md (metrics_test.go), are here as written there
// (TestGuideGoBlocks checks it); TestGuides runs each.

// incrementCount is the README's Quick start closure, as a function body.
func incrementCount(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(ctx context.Context) error {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}) // read afresh
		if err != nil {
			return err
		}
		cm.Data["count"] = next(cm.Data["count"])
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err // as it is: the loop must see the Conflict
	})
	return err
}

// setupManager is the recommended setup of the README and
// docs/controller-runtime.md: one Budget on the manager's rest.Config, its
// holds logged, its counters on the manager's metrics endpoint.
func setupManager(cfg *rest.Config) (ctrl.Manager, error) {
	budget := retry.NewBudget()
	budget.OnHold = ctrlretry.LogHolds(ctrl.Log.WithName("retry"))
	metrics.Registry.MustRegister(ctrlretry.BudgetMetrics(budget))
	cfg.Wrap(budget.WrapTransport) // every request of the process, client-go's resends included
	return ctrl.NewManager(cfg, ctrl.Options{})
}

// next returns the decimal count after s ("" counts as 0).
func next(s string) string {
	n, _ := strconv.Atoi(s)
	return strconv.Itoa(n + 1)
}

// Reconciler is the reconciler of docs/writes.md: Client reads from the
// manager's cache, APIReader (mgr.GetAPIReader()) from the server.
type Reconciler struct {
	client.Client
	APIReader client.Reader
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil { // the cache
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, &cm,
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			var fresh corev1.ConfigMap
			err := r.APIReader.Get(ctx, req.NamespacedName, &fresh) // mgr.GetAPIReader()
			return &fresh, err
		},
		func(cm *corev1.ConfigMap) error {
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "example.com/summary", summarize(cm.Data))
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cm, r.Update(ctx, cm) // Update fills cm in with the stored object
		})
	return ctrl.Result{}, err
}

// summarize is what Reconciler records of a ConfigMap's data.
func summarize(data map[string]string) string {
	return fmt.Sprintf("%d keys", len(data))
}

// hot is docs/contention.md's Contention: one per hot object, kept for
// the life of the process.
var hot = retry.NewContention()

// updateHot is docs/contention.md's UpdateOnConflict with HotObjectBackoff.
func updateHot(ctx context.Context, cached *corev1.ConfigMap, get func(context.Context) (*corev1.ConfigMap, error),
	mutate func(*corev1.ConfigMap) error, update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error)) (*corev1.ConfigMap, error) {
	// retry.HotObjectBackoff: 30 attempts, the first retry after 5ms to 10ms, each wait 1.3x the one before.
	// retry.Backoff{Steps: 30, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1.0}
	cm, err := retry.UpdateOnConflict(ctx, retry.HotObjectBackoff, cached, get, mutate, update, retry.WithContention(hot))
	return cm, err
}

// rideOut is docs/outages.md's composition for a failing apiserver.
func rideOut(ctx context.Context, outage retry.Backoff, get func(context.Context) (*corev1.ConfigMap, error),
	mutate func(*corev1.ConfigMap) error, update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error)) (*corev1.ConfigMap, error) {
	cm, err := retry.OnErrorValue(ctx, outage, retry.IsTransient,
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			return retry.UpdateOnConflict(ctx, retry.DefaultBackoff, nil, get, mutate, update)
		})
	return cm, err
}

// apiBudget bounds the retries of every loop that talks to the apiserver:
// one Budget per apiserver per process.
var apiBudget = &retry.Budget{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}

// reconcileInBudget is docs/outages.md's composition with the budget, in
// a reconciler.
func reconcileInBudget(ctx context.Context, outage retry.Backoff, get func(context.Context) (*corev1.ConfigMap, error),
	mutate func(*corev1.ConfigMap) error, update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error)) (ctrl.Result, error) {
	_, err := retry.OnErrorValue(ctx, outage, retry.IsTransient,
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			return retry.UpdateOnConflict(ctx, retry.DefaultBackoff, nil, get, mutate, update)
		}, retry.WithBudget(apiBudget))
	if err != nil {
		return ctrl.Result{}, err // a refusal too (errors.Is(err, retry.ErrBudgetExhausted)): the workqueue requeues the key
	}
	return ctrl.Result{}, nil
}

// heldCall is docs/outages.md's call through a refusalHold.
func heldCall(ctx context.Context, hold *refusalHold, key string, reconcileWrites func(context.Context, string) error) error {
	probe := hold.acquire(ctx)       // blocks while the apiserver is held; one probe at a time
	err := reconcileWrites(ctx, key) // the loops, WithBudget(apiBudget)
	hold.release(probe, err, errors.Is(err, retry.ErrBudgetExhausted))
	return err // a refusal too: the workqueue requeues the key
}

// TestGuides runs the snippets of this file, each against a real
// apiserver (but for the hold, which needs none), counting what each sends
// on the wire.
func TestGuides(t *testing.T) {
	s := startServer(t)
	w := newWriteEnv(t, s.Config)
	t.Run("QuickStartClosure", func(t *testing.T) { testIncrementCount(t, w) })
	t.Run("Reconciler", func(t *testing.T) { testReconciler(t, w) })
	t.Run("HotObjectBackoff", func(t *testing.T) { testUpdateHot(t, w) })
	t.Run("Outage", func(t *testing.T) { testRideOut(t, w) })
	t.Run("Budget", func(t *testing.T) { testReconcileInBudget(t, w) })
	t.Run("Hold", testHeldCall)
	t.Run("Setup", func(t *testing.T) { testSetupManager(t, s.Config) })
}

// testSetupManager builds a manager with setupManager and checks that its
// requests reach the budget and the budget's counters the registry: a
// List through the manager's API reader counts one first attempt more in
// kuberetry_budget_first_attempts_total.
func testSetupManager(t *testing.T, cfg *rest.Config) {
	mgr, err := setupManager(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The registry is the process's: another test registers the same
		// names. A collector of another Budget has the same descriptors,
		// so it unregisters setupManager's.
		if !metrics.Registry.Unregister(ctrlretry.BudgetMetrics(retry.NewBudget())) {
			t.Error("setupManager's BudgetMetrics could not be unregistered")
		}
	})
	before := firstAttempts(t)
	var cms corev1.ConfigMapList
	if err := mgr.GetAPIReader().List(t.Context(), &cms, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if after := firstAttempts(t); after < before+1 {
		t.Errorf("kuberetry_budget_first_attempts_total went from %v to %v over a List, want at least one more", before, after)
	}
}

// firstAttempts reads kuberetry_budget_first_attempts_total from
// controller-runtime's registry, failing t when it is not there.
func firstAttempts(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "kuberetry_budget_first_attempts_total" {
			var n float64
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
			return n
		}
	}
	t.Fatal("kuberetry_budget_first_attempts_total is not in controller-runtime's registry")
	return 0
}

// createApp creates the ConfigMap "app" with data in a namespace of its
// own, through the uncounted client, and returns it.
func createApp(t *testing.T, w *writeEnv, prefix string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	ns := w.namespace(t, prefix)
	cm, err := w.admin.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// patchData merges data into the live ConfigMap, as another writer would.
func patchData(t *testing.T, w *writeEnv, cm *corev1.ConfigMap, data string) {
	t.Helper()
	if _, err := w.admin.CoreV1().ConfigMaps(cm.Namespace).Patch(t.Context(), cm.Name, types.MergePatchType, []byte(`{"data":`+data+`}`), metav1.PatchOptions{}); err != nil {
		t.Error(err)
	}
}

// live reads cm's current state through the uncounted client.
func live(t *testing.T, w *writeEnv, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	got, err := w.admin.CoreV1().ConfigMaps(cm.Namespace).Get(t.Context(), cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// typedLoop returns the get, mutate and update of a read-change-write on
// cm through the counted client, mutate setting data key to value.
func typedLoop(w *writeEnv, cm *corev1.ConfigMap, key, value string) (func(context.Context) (*corev1.ConfigMap, error), func(*corev1.ConfigMap) error, func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error)) {
	cms := w.client.CoreV1().ConfigMaps(cm.Namespace)
	get := func(ctx context.Context) (*corev1.ConfigMap, error) {
		return cms.Get(ctx, cm.Name, metav1.GetOptions{})
	}
	mutate := func(cm *corev1.ConfigMap) error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		return nil
	}
	update := func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		return cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return get, mutate, update
}

// A writer that sets count to 10 between the closure's read and its
// update: the update meets a Conflict, the retry reads afresh and counts
// on from 10.
func testIncrementCount(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	cm := createApp(t, w, "quickstart-closure-", map[string]string{"count": "0"})
	var err error
	wantRequests(t, "no other writer", w.requests("configmaps", func() { err = incrementCount(ctx, w.client, cm.Namespace, cm.Name) }),
		map[string]int{"get 200": 1, "update 200": 1})
	if err != nil {
		t.Fatal(err)
	}
	w.before("update", "configmaps", func() { patchData(t, w, cm, `{"count":"10"}`) })
	wantRequests(t, "another writer in between", w.requests("configmaps", func() { err = incrementCount(ctx, w.client, cm.Namespace, cm.Name) }),
		map[string]int{"get 200": 2, "update 409": 1, "update 200": 1})
	if got := live(t, w, cm).Data["count"]; err != nil || got != "11" {
		t.Errorf("after the race: %v, count %q, want nil and 11", err, got)
	}
}

// laggingCache is a client whose Get returns a copy of cached, as an
// informer's cache does until its watch catches up; its writes go to the
// server.
type laggingCache struct {
	client.Client
	cached *corev1.ConfigMap
}

func (c laggingCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.cached.DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

// countingReader counts the reads that go through it.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// The reconciler from a cache that lags the server (another writer added
// a key): its update meets a Conflict, its retry reads through the API
// reader, and the annotation sums up what the server holds; the cached
// copy is never modified. From a cache that has caught up, nothing is
// read or written.
func testReconciler(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	cm := createApp(t, w, "reconciler-", map[string]string{"a": "1"})
	server, err := client.New(w.base, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()
	patchData(t, w, cm, `{"b":"2"}`)
	reader := &countingReader{Reader: server}
	r := &Reconciler{Client: laggingCache{Client: server, cached: stale}, APIReader: reader}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := live(t, w, cm)
	t.Logf("from a stale cache: %d read through the API reader; stored data %v, annotations %v", reader.gets, got.Data, got.Annotations)
	if reader.gets != 1 || got.Data["b"] != "2" || got.Annotations["example.com/summary"] != summarize(got.Data) {
		t.Errorf("from a stale cache: %d API reads, data %v, annotations %v; want 1, the other writer's key kept and %q", reader.gets, got.Data, got.Annotations, summarize(got.Data))
	}
	if stale.Annotations != nil {
		t.Errorf("the cached object was modified: annotations %v", stale.Annotations)
	}
	reader.gets = 0
	r.Client = laggingCache{Client: server, cached: got}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if again := live(t, w, cm); reader.gets != 0 || again.ResourceVersion != got.ResourceVersion {
		t.Errorf("from a fresh cache: %d API reads, resourceVersion %s after %s; want none and no write", reader.gets, again.ResourceVersion, got.ResourceVersion)
	}
}

// The comment of the snippet gives HotObjectBackoff's value; from a stale
// cached object, the one retry waits at least its 5ms.
func testUpdateHot(t *testing.T, w *writeEnv) {
	if want := (retry.Backoff{Steps: 30, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1.0}); retry.HotObjectBackoff != want {
		t.Errorf("HotObjectBackoff is %+v, the snippet says %+v", retry.HotObjectBackoff, want)
	}
	ctx := t.Context()
	cached := createApp(t, w, "hot-", nil)
	patchData(t, w, cached, `{"other":"1"}`)
	get, mutate, update := typedLoop(w, cached, "mine", "1")
	var got *corev1.ConfigMap
	var err error
	start := time.Now()
	wantRequests(t, "from a stale object", w.requests("configmaps", func() { got, err = updateHot(ctx, cached, get, mutate, update) }),
		map[string]int{"update 409": 1, "get 200": 1, "update 200": 1})
	took := time.Since(start)
	t.Logf("took %v", took)
	if err != nil || got.Data["mine"] != "1" || got.Data["other"] != "1" {
		t.Errorf("updateHot: %v, data %v; want nil and both keys", err, got.Data)
	}
	if took < 5*time.Millisecond {
		t.Errorf("updateHot took %v, less than HotObjectBackoff's shortest wait", took)
	}
}

// unavailableOnce returns get, failing with a 503 on its first call, as an
// apiserver on its way down does.
func unavailableOnce(get func(context.Context) (*corev1.ConfigMap, error), calls *int) func(context.Context) (*corev1.ConfigMap, error) {
	return func(ctx context.Context) (*corev1.ConfigMap, error) {
		if *calls++; *calls == 1 {
			return nil, apierrors.NewServiceUnavailable("the apiserver is restarting")
		}
		return get(ctx)
	}
}

// The outer loop retries the 503, the inner one the Conflict another
// writer causes.
func testRideOut(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	cm := createApp(t, w, "outage-", nil)
	get, mutate, update := typedLoop(w, cm, "mine", "1")
	gets := 0
	w.before("update", "configmaps", func() { patchData(t, w, cm, `{"other":"1"}`) })
	var got *corev1.ConfigMap
	var err error
	outage := retry.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 2}
	wantRequests(t, "a 503, then a Conflict", w.requests("configmaps", func() { got, err = rideOut(ctx, outage, unavailableOnce(get, &gets), mutate, update) }),
		map[string]int{"get 200": 2, "update 409": 1, "update 200": 1})
	if err != nil || gets != 3 || got.Data["mine"] != "1" || got.Data["other"] != "1" {
		t.Errorf("rideOut: %v after %d gets, data %v; want nil after 3 (the 503 and two reads) and both keys", err, gets, got.Data)
	}
}

// Through a Conflict the budget is not asked (the inner loop retries);
// against an apiserver that keeps failing, the budget refuses the outer
// loop long before its Steps, with an error that is ErrBudgetExhausted
// and the last 503.
func testReconcileInBudget(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	cm := createApp(t, w, "budget-", nil)
	get, mutate, update := typedLoop(w, cm, "mine", "1")
	outage := retry.Backoff{Steps: 1000} // no wait: the budget, not the time, must end it
	w.before("update", "configmaps", func() { patchData(t, w, cm, `{"other":"1"}`) })
	var err error
	wantRequests(t, "a Conflict", w.requests("configmaps", func() { _, err = reconcileInBudget(ctx, outage, get, mutate, update) }),
		map[string]int{"get 200": 2, "update 409": 1, "update 200": 1})
	if got := live(t, w, cm); err != nil || got.Data["mine"] != "1" {
		t.Errorf("reconcileInBudget: %v, data %v; want nil and the key", err, got.Data)
	}

	gets := 0
	failing := func(context.Context) (*corev1.ConfigMap, error) {
		gets++
		return nil, apierrors.NewServiceUnavailable("etcd is down")
	}
	_, err = reconcileInBudget(ctx, outage, failing, mutate, update)
	t.Logf("against a failing apiserver: %d attempts, %v", gets, err)
	if !errors.Is(err, retry.ErrBudgetExhausted) || !apierrors.IsServiceUnavailable(err) || gets >= outage.Steps {
		t.Errorf("against a failing apiserver: %v after %d attempts; want a refusal wrapping the 503 before %d attempts", err, gets, outage.Steps)
	}
}

// A refusal holds the next call back until the hold's delay has passed,
// and lets it through as a probe; its success ends the hold.
func testHeldCall(t *testing.T) {
	ctx := t.Context()
	hold := &refusalHold{min: 20 * time.Millisecond, max: 40 * time.Millisecond}
	refusal := fmt.Errorf("reconcile: %w", retry.ErrBudgetExhausted)
	beforeRefusal := time.Now()
	if err := heldCall(ctx, hold, "a", func(context.Context, string) error { return refusal }); err != refusal {
		t.Fatalf("heldCall returned %v, want the refusal", err)
	}
	var started time.Time
	if err := heldCall(ctx, hold, "b", func(context.Context, string) error { started = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	hold.mu.Lock()
	defer hold.mu.Unlock()
	if waited := started.Sub(beforeRefusal); waited < hold.min || hold.held || hold.holds != 1 || hold.probes != 1 {
		t.Errorf("the call after a refusal started %v after it, hold held %v, %d holds, %d probes; want at least %v, not held, 1 and 1",
			waited, hold.held, hold.holds, hold.probes, hold.min)
	}
}

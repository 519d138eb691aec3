package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// The reconciler's ConfigMap: the writer changes valueKey, the reconciler
// keeps doubledKey, a status-like field, equal to twice it.
const (
	valueKey   = "value"
	doubledKey = "doubled"
)

// doubled is the doubledKey value that the valueKey value v calls for.
func doubled(v string) string {
	n, err := strconv.Atoi(v)
	if err != nil {
		return "invalid: " + v
	}
	return strconv.Itoa(2 * n)
}

// doubler is a controller-runtime reconciler that sets doubledKey with
// UpdateOnConflict: current from the manager's cached client, get through
// the manager's API reader (the server, never the cache), and counts what
// every call did.
type doubler struct {
	target types.NamespacedName
	cached client.Client // the manager's client: reads from its cache
	live   client.Reader // the manager's API reader: reads from the server

	mu sync.Mutex
	// Per UpdateOnConflict call, and so per reconcile of target.
	reconciles int // reconciles of target, each one cache read (current)
	attempts   int // calls of mutate
	gets       int // calls of get, each one a read through the API reader
	updates    int // calls of update
	conflicts  int // updates that met a Conflict
	// endedOnConflict counts calls that returned a Conflict (exhausted,
	// or cut short by ctx), whose last Conflict no get followed.
	endedOnConflict int
	// staleRereads counts gets that returned the very resourceVersion
	// that had just conflicted: a retry spent on a stale copy.
	staleRereads int
	// noops counts calls that found doubledKey right and wrote nothing.
	noops int
	// lastNoopRV is the resourceVersion of the latest cached object that
	// needed no write: the reconciler has seen it and is done with it.
	lastNoopRV string
	unexpected error // the first error other than a Conflict
}

// Reconcile makes doubledKey agree with valueKey.
func (d *doubler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.NamespacedName != d.target {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := d.cached.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	d.count(func() { d.reconciles++ })

	var conflictedRV string // the resourceVersion of the write that last met a Conflict
	wrote := false
	_, err := retry.UpdateOnConflict(ctx, generousUpdate, &cm,
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			var live corev1.ConfigMap
			err := d.live.Get(ctx, req.NamespacedName, &live)
			d.count(func() {
				d.gets++
				if err == nil && live.ResourceVersion == conflictedRV {
					d.staleRereads++
				}
			})
			if err != nil {
				return nil, err
			}
			return &live, nil
		},
		func(cm *corev1.ConfigMap) error {
			d.count(func() { d.attempts++ })
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[doubledKey] = doubled(cm.Data[valueKey])
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			wrote = true
			rv := cm.ResourceVersion
			err := d.cached.Update(ctx, cm)
			d.count(func() {
				d.updates++
				if apierrors.IsConflict(err) {
					d.conflicts++
				}
			})
			if apierrors.IsConflict(err) {
				conflictedRV = rv
			}
			return cm, err
		})
	d.count(func() {
		switch {
		case apierrors.IsConflict(err):
			d.endedOnConflict++
		case err != nil && d.unexpected == nil:
			d.unexpected = err
		case err == nil && !wrote:
			d.noops++
			d.lastNoopRV = cm.ResourceVersion
		}
	})
	// An error requeues the request with backoff, as in any controller.
	return reconcile.Result{}, err
}

func (d *doubler) count(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
}

// testControllerRuntime runs a real controller-runtime manager whose
// reconciler keeps a derived field of a ConfigMap right with
// UpdateOnConflict while another client keeps changing the ConfigMap's
// data. It checks that the reconciler converges, that contention really
// happened, and, counted both in the reconciler and at the manager's HTTP
// transport, that the cache was read once per reconcile (as current) and
// every retry read the server: API reads == Conflicts retried, none of
// them returning the version that had just conflicted.
func testControllerRuntime(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "controller-")
	target := types.NamespacedName{Namespace: ns, Name: "target"}
	_, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: target.Name},
		Data:       map[string]string{valueKey: "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var wire reqcount.Counter
	var d *doubler
	stop := startManager(t, ctx, s, ns, "doubler", &wire, func(mgr manager.Manager) reconcile.Reconciler {
		d = &doubler{target: target, cached: mgr.GetClient(), live: mgr.GetAPIReader()}
		return d
	})
	defer stop()

	// The other writer changes valueKey as fast as it can, each change a
	// read-change-write of its own, until the reconciler has met a few
	// Conflicts (bounded: a run without any fails below).
	const minConflicts, maxWrites = 5, 400
	writes, last := 0, ""
	cms := s.Client.CoreV1().ConfigMaps(ns)
	for writes < maxWrites {
		d.mu.Lock()
		enough := d.conflicts >= minConflicts
		d.mu.Unlock()
		if enough {
			break
		}
		writes++
		v := strconv.Itoa(writes)
		err := retry.RetryOnConflictWithContext(ctx, generousUpdate, func(ctx context.Context) error {
			cm, err := cms.Get(ctx, target.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data[valueKey] = v
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
		last = v
	}

	// Converged: the server's object has the writer's last value and the
	// doubled field that goes with it, and the reconciler has seen that
	// very version in its cache and found nothing to write, so no more
	// requests are coming.
	var final *corev1.ConfigMap
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		final = cm
		d.mu.Lock()
		defer d.mu.Unlock()
		return cm.Data[valueKey] == last && cm.Data[doubledKey] == doubled(last) && d.lastNoopRV == cm.ResourceVersion, nil
	})
	if err != nil {
		t.Fatalf("the reconciler did not converge: %v; last object %v, last no-op at resourceVersion %s", err, final, d.lastNoopRV)
	}
	w := wire.Snapshot()
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("manager: %v", err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	wireGets, wireUpdates := w[reqcount.Key{Verb: "get", Resource: "configmaps"}], w[reqcount.Key{Verb: "update", Resource: "configmaps"}]
	t.Logf("%d writes by the other writer; reconciler: %d reconciles (one cache read each), %d attempts, %d API reads, %d updates, %d conflicts (%d ended a call), %d no-op reconciles",
		writes, d.reconciles, d.attempts, d.gets, d.updates, d.conflicts, d.endedOnConflict, d.noops)
	t.Logf("the manager's requests on the wire: %s", formatCounts(w, "configmaps"))

	if d.unexpected != nil {
		t.Errorf("a reconcile failed with a non-Conflict error: %v", d.unexpected)
	}
	if d.conflicts == 0 {
		t.Fatalf("%d writes met no Conflict in the reconciler: the test proves nothing about retries", writes)
	}
	// Each retried Conflict was followed by one read of the server, and
	// no other read happened: the only cache read of a reconcile is its
	// current.
	if retried := d.conflicts - d.endedOnConflict; d.gets != retried {
		t.Errorf("%d API reads for %d retried Conflicts, want one each", d.gets, retried)
	}
	if d.attempts != d.reconciles+d.gets {
		t.Errorf("%d attempts in %d reconciles with %d API reads: some attempt read neither current nor the server", d.attempts, d.reconciles, d.gets)
	}
	if d.staleRereads > 0 {
		t.Errorf("%d retries read back the version that had just conflicted", d.staleRereads)
	}
	// The server's view: the cached reads never reached it, each API read
	// and each update did.
	if wireGets != d.gets || wireUpdates != d.updates {
		t.Errorf("the wire saw %d GETs and %d PUTs of ConfigMaps; the reconciler made %d API reads and %d updates", wireGets, wireUpdates, d.gets, d.updates)
	}
	if d.noops == 0 {
		t.Error("no reconcile skipped the update, not even after the reconciler's own write")
	}
}

// startManager starts a controller-runtime manager on s that caches ns
// and sends every request (cache, API reader, writes) through wire, with
// one controller, name, watching ConfigMaps, whose reconciler
// newReconciler returns; it waits for the cache to sync. stop stops the
// manager, the first time it is called, and returns what its Start
// returned.
func startManager(t *testing.T, ctx context.Context, s *testserver.Server, ns, name string, wire *reqcount.Counter,
	newReconciler func(manager.Manager) reconcile.Reconciler) (stop func() error) {
	t.Helper()
	mgr := newManager(t, wire.Config(s.Config), ns)
	if err := builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named(name).Complete(newReconciler(mgr)); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopMgr()
		return <-mgrDone
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		stop()
		t.Fatal("the manager's cache did not sync")
	}
	return stop
}

// newManager returns a manager, not started, whose clients use cfg and
// whose cache holds ns, without leader election, metrics or probes.
func newManager(t *testing.T, cfg *rest.Config, ns string) manager.Manager {
	t.Helper()
	return newManagerWith(t, cfg, ns, crClient{cached: true})
}

// newManagerWith is newManager whose client reads its cache as m says
// (read-your-writes or not).
func newManagerWith(t *testing.T, cfg *rest.Config, ns string, m crClient) manager.Manager {
	t.Helper()
	// The manager's log says nothing the tests check; without a logger
	// controller-runtime complains on standard error after 30s.
	ctrllog.SetLogger(logr.Discard())
	mgr, err := manager.New(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Client:                 client.Options{Cache: m.cacheOptions(nil)}, // the manager's cache as Reader
		// -count=N builds the same controller again in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// formatCounts lists c's verbs for resource, e.g. "get 3, update 5".
func formatCounts(c reqcount.Counts, resource string) string {
	s := ""
	for _, verb := range []string{"list", "watch", "get", "create", "update", "patch", "delete"} {
		if n := c[reqcount.Key{Verb: verb, Resource: resource}]; n > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", verb, n)
		}
	}
	return resource + ": " + s
}

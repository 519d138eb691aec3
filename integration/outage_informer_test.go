package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// informerRun is one controller-runtime manager through an outage: leader
// election on (controller-runtime's defaults: 15s lease, 10s renew
// deadline, 2s retry period) and a shared ConfigMap informer, every
// request through a proxy of its own, counted on the wire, with or
// without a NewBudget() on the wire.
type informerRun struct {
	name   string
	ns     string
	budget *retry.Budget // nil: no budget
	proxy  *faultproxy.Proxy
	wire   *reqcount.Counter
	mgr    manager.Manager
	done   chan error // Start's return
	stop   context.CancelFunc

	// at the outage's start and end, and at the end
	counts [3]reqcount.Counts
	stats  [3]retry.BudgetStats

	lease      types.NamespacedName
	holder     string
	leaseMoves int32 // leaseTransitions when the outage began

	marker    string        // the ConfigMap's resourceVersion written during the outage
	firstReq  time.Duration // the informer's first list or watch after the outage, after its end
	inSync    time.Duration // when the informer's cache had the marker, after the outage's end
	lostEarly error         // Start returned before the test stopped it
}

const informerMarker = "outage-marker"

// listWatch returns the informer's list and watch requests in c.
func listWatch(c reqcount.Counts) int {
	return c[reqcount.Key{Verb: "list", Resource: "configmaps"}] + c[reqcount.Key{Verb: "watch", Resource: "configmaps"}]
}

func newInformerRun(t *testing.T, ctx context.Context, s *testserver.Server, name string, budget *retry.Budget) *informerRun {
	t.Helper()
	proxy, err := faultproxy.New(faultHostOf(t, s.Config.Host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	r := &informerRun{name: name, ns: createNamespace(t, s, "outage-informer-"), budget: budget, proxy: proxy, wire: &reqcount.Counter{}, done: make(chan error, 1)}
	cfg := r.wire.Config(s.Config)
	cfg.Host = "https://" + proxy.Addr()
	if budget != nil {
		cfg.Wrap(budget.WrapTransport)
	}
	r.lease = types.NamespacedName{Namespace: r.ns, Name: "outage-leader"}
	r.mgr, err = manager.New(cfg, manager.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        r.lease.Name,
		LeaderElectionNamespace: r.ns,
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{r.ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	r.stop = stop
	go func() { r.done <- r.mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		<-r.done
	})
	return r
}

func (r *informerRun) mark(i int) {
	r.counts[i] = r.wire.Snapshot()
	if r.budget != nil {
		r.stats[i] = r.budget.Stats()
	}
}

// TestOutageInformers is the outage test of informers: a controller-runtime
// manager with leader election and a shared informer, through
// NewBudget() on the wire, across the same 5s outage, beside one without
// a budget. It asserts that the manager keeps its leadership (its Lease
// has the same holder and no transition, and Start did not return); that
// the budget refuses and holds nothing from the outage's end on; that
// the informer has a ConfigMap written during the outage within 2s of its
// first list or watch after it; and that its list and watch requests
// during the outage are no more than without a budget.
func TestOutageInformers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ctrllog.SetLogger(logr.Discard())
	s := startServer(t)
	runs := []*informerRun{
		newInformerRun(t, ctx, s, "no budget", nil),
		newInformerRun(t, ctx, s, "NewBudget()", retry.NewBudget()),
	}
	for _, r := range runs {
		select {
		case <-r.mgr.Elected():
		case err := <-r.done:
			t.Fatalf("%s: the manager stopped before it was elected: %v", r.name, err)
		case <-ctx.Done():
			t.Fatalf("%s: not elected: %v", r.name, ctx.Err())
		}
		if !r.mgr.GetCache().WaitForCacheSync(ctx) {
			t.Fatalf("%s: the cache did not sync", r.name)
		}
		lease, err := s.Client.CoordinationV1().Leases(r.ns).Get(ctx, r.lease.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.holder = *lease.Spec.HolderIdentity
		if lease.Spec.LeaseTransitions != nil {
			r.leaseMoves = *lease.Spec.LeaseTransitions
		}
	}

	sleepCtx(ctx, 3*time.Second)
	for _, r := range runs {
		r.mark(0)
		r.proxy.SetOutage(true)
	}
	start := time.Now()
	sleepCtx(ctx, time.Second)
	for _, r := range runs {
		cm, err := s.Client.CoreV1().ConfigMaps(r.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: informerMarker},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.marker = cm.ResourceVersion
	}
	sleepCtx(ctx, time.Until(start.Add(5*time.Second)))
	for _, r := range runs {
		r.mark(1)
		r.proxy.SetOutage(false)
	}
	end := time.Now()

	// Watch each run until its informer has the marker (at most 20s),
	// noting its first list or watch after the outage; then 3s more, so
	// that a late refusal or hold would show.
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.firstReq, r.inSync = -1, -1
			base := listWatch(r.counts[1])
			for deadline := end.Add(20 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
				if r.firstReq < 0 && listWatch(r.wire.Snapshot()) > base {
					r.firstReq = time.Since(end)
				}
				cm := &corev1.ConfigMap{}
				if err := r.mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: r.ns, Name: informerMarker}, cm); err == nil && cm.ResourceVersion == r.marker {
					r.inSync = time.Since(end)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	sleepCtx(ctx, 3*time.Second)
	for _, r := range runs {
		r.mark(2)
		select {
		case err := <-r.done:
			r.lostEarly = fmt.Errorf("Start returned %v", err)
			r.done <- err // for the cleanup
		default:
		}
	}

	for _, r := range runs {
		during := r.counts[1].Sub(r.counts[0])
		t.Logf("%s: during the outage %d list and watch requests (%d lists, %d watches), %d to leases; after it, first list or watch at %v, in sync at %v",
			r.name, listWatch(during), during[reqcount.Key{Verb: "list", Resource: "configmaps"}], during[reqcount.Key{Verb: "watch", Resource: "configmaps"}],
			during.Resource("leases"), r.firstReq.Round(time.Millisecond), r.inSync.Round(time.Millisecond))
		if r.lostEarly != nil {
			t.Errorf("%s: the manager lost its leadership: %v", r.name, r.lostEarly)
		}
		lease, err := s.Client.CoordinationV1().Leases(r.ns).Get(ctx, r.lease.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		moves := int32(0)
		if lease.Spec.LeaseTransitions != nil {
			moves = *lease.Spec.LeaseTransitions
		}
		if *lease.Spec.HolderIdentity != r.holder || moves != r.leaseMoves {
			t.Errorf("%s: the Lease is held by %q after %d transitions, was %q after %d", r.name, *lease.Spec.HolderIdentity, moves, r.holder, r.leaseMoves)
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(end) {
			t.Errorf("%s: the Lease was not renewed after the outage (renewed %v)", r.name, lease.Spec.RenewTime)
		}
		switch {
		case r.inSync < 0:
			t.Errorf("%s: the informer never had the ConfigMap written during the outage (first list or watch after it at %v)", r.name, r.firstReq)
		case r.firstReq < 0:
			t.Errorf("%s: in sync at %v, with no list or watch seen after the outage", r.name, r.inSync)
		case r.inSync-r.firstReq > 2*time.Second:
			t.Errorf("%s: in sync %v after its first list or watch after the outage, want within 2s", r.name, (r.inSync - r.firstReq).Round(time.Millisecond))
		}
	}
	none, ours := runs[0], runs[1]
	if got, base := listWatch(ours.counts[1].Sub(ours.counts[0])), listWatch(none.counts[1].Sub(none.counts[0])); got > base {
		t.Errorf("with NewBudget() %d list and watch requests during the outage, more than the %d without a budget", got, base)
	}
	d := func(i, j int) retry.BudgetStats { return outage.StatsDelta(ours.stats[i], ours.stats[j]) }
	t.Logf("NewBudget(): during the outage %+v; after it %+v", d(0, 1), d(1, 2))
	if after := d(1, 2); after.Refused > 0 || after.Held > 0 {
		t.Errorf("NewBudget(): after the outage %d requests refused and %d held, want none", after.Refused, after.Held)
	}
}

package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// generousUpdate gives every increment of these tests room to get
// through 16 writers: 30 attempts, the Cap out of reach within them
// (reaching it would end the loop early), as TestConflicts uses.
var generousUpdate = retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0, Cap: 2 * time.Second}

// TestUpdateOnConflict runs UpdateOnConflict against one apiserver, each
// subtest in a namespace of its own: typed clientset writers starting
// from an informer's cache, the requests it saves over client-go's idiom,
// and a controller-runtime reconciler.
func TestUpdateOnConflict(t *testing.T) {
	s := startServer(t)
	t.Run("Informer", func(t *testing.T) { testUpdateFromInformer(t, s) })
	t.Run("RequestsPerUpdate", func(t *testing.T) { testRequestsPerUpdate(t, s) })
	t.Run("ControllerRuntime", func(t *testing.T) { testControllerRuntime(t, s) })
}

// testUpdateFromInformer has 16 writers increment one ConfigMap counter
// 25 times each with UpdateOnConflict, current taken from a shared
// informer's lister (which lags the server under this load) and get a
// live GET, and checks: the counter equals the increments that returned
// nil (nothing lost or doubled), every give-up is a Conflict after Steps
// attempts, no call made more than Steps attempts, only retries read
// (one GET per attempt after the first), and no call touched the
// informer's cached object.
func testUpdateFromInformer(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "informer-")
	const name, writers, updates = "counter", 16, 25

	lister := startInformer(t, ctx, s.Client, ns)

	strategy := contention.Strategy{Name: "UpdateOnConflict from an informer", Steps: generousUpdate.Steps, Update: contention.UpdateOnConflict(generousUpdate)}
	res, err := contention.Run(ctx, strategy, contention.Config{
		Client: s.Client, Namespace: ns, Name: name, Writers: writers, Updates: updates,
		// The cache's object, shared by every writer, as a controller's
		// lister hands it out; nil until the informer has seen it.
		Current: fromLister(lister, name),
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := contention.Summarize(res)
	fromCache := 0
	for _, c := range res.Calls {
		if c.Current {
			fromCache++
		}
	}
	t.Logf("%d writers x %d increments: %d succeeded, %d gave up, %d conflicts, %d attempts (max %d per call), %d GETs, %d calls started from the cache, wall %v",
		writers, updates, sum.Succeeded, sum.GaveUp, sum.Conflicts, sum.Attempts, sum.MaxAttempts, sum.Gets, fromCache, sum.Wall.Round(time.Millisecond))

	checkContention(t, res, sum, writers*updates, strategy.Steps)
	if sum.Succeeded != sum.Updates {
		t.Errorf("%d of %d calls gave up with a backoff generous enough for all", sum.GaveUp, sum.Updates)
	}
	if fromCache == 0 {
		t.Error("no call started from the informer's object: the test proves nothing about a cached current")
	}
	if sum.CurrentModified > 0 {
		t.Errorf("%d calls modified the informer's cached object", sum.CurrentModified)
	}
	for i, c := range res.Calls {
		// Rule 1: the first attempt works on current when there is one;
		// every later attempt, and only those, reads afresh.
		want := c.Attempts
		if c.Current {
			want--
		}
		if c.Gets != want {
			t.Errorf("call %d: %d attempts (current given: %v) made %d GETs, want %d", i, c.Attempts, c.Current, c.Gets, want)
			break
		}
	}
}

// startInformer starts a shared informer for the ConfigMaps in ns, waits
// for it to sync and returns its lister; the informer stops when t ends.
func startInformer(t *testing.T, ctx context.Context, client kubernetes.Interface, ns string) corelisters.ConfigMapNamespaceLister {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	lister := factory.Core().V1().ConfigMaps().Lister().ConfigMaps(ns)
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown() // waits for the informer's goroutines
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	return lister
}

// fromLister returns a contention.Config.Current that hands out the
// lister's cached object, shared by every writer, as a controller's lister
// does; nil until the informer has seen it.
func fromLister(lister corelisters.ConfigMapNamespaceLister, name string) func(int) *corev1.ConfigMap {
	return func(int) *corev1.ConfigMap {
		cm, err := lister.Get(name)
		if err != nil {
			return nil
		}
		return cm
	}
}

// testRequestsPerUpdate counts, at the HTTP transport, the ConfigMap
// requests per successful increment of client-go's documented idiom (a
// Get inside retry.RetryOnConflict) and of UpdateOnConflict starting from
// the object the writer's previous update returned, with one writer and
// with 16, the same backoff for both. With one writer the idiom pays a GET
// and a PUT per update where UpdateOnConflict pays the PUT alone; the
// test asserts UpdateOnConflict needs at most 0.55x the idiom's requests
// there, and that the wire saw exactly the reads and writes the loops
// made. For comparison it logs, unasserted, UpdateOnConflict starting
// from an informer's lister, whose object lags a writer that updates again
// at once (the informer's own LIST and WATCH, one per process, are not
// counted).
func testRequestsPerUpdate(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "requests-")
	lister := startInformer(t, ctx, s.Client, ns)

	idiom := contention.Strategy{
		Name: "client-go idiom", Steps: generousUpdate.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return cgretry.RetryOnConflict(wait.Backoff(generousUpdate), func() error { return fn(ctx) })
		},
	}
	uoc := contention.Strategy{Name: "UpdateOnConflict", Steps: generousUpdate.Steps, Update: contention.UpdateOnConflict(generousUpdate)}
	informer := contention.Strategy{Name: "from an informer", Steps: generousUpdate.Steps, Update: contention.UpdateOnConflict(generousUpdate)}

	runs := []struct {
		writers, updates int
		// Per strategy above, in order.
		sums [3]contention.Summary
	}{{writers: 1, updates: 20}, {writers: 16, updates: 10}}
	for i := range runs {
		r := &runs[i]
		for j, st := range []contention.Strategy{idiom, uoc, informer} {
			var counter reqcount.Counter
			client, err := kubernetes.NewForConfig(counter.Config(s.Config))
			if err != nil {
				t.Fatal(err)
			}
			cfg := contention.Config{
				Client: client, Namespace: ns, Name: fmt.Sprintf("counter-%d-%d", i, j),
				Writers: r.writers, Updates: r.updates, Requests: &counter,
			}
			if st.Name == informer.Name {
				cfg.Current = fromLister(lister, cfg.Name)
			}
			res, err := contention.Run(ctx, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sum := contention.Summarize(res)
			gets, puts := res.Requests[reqcount.Key{Verb: "get", Resource: "configmaps"}], res.Requests[reqcount.Key{Verb: "update", Resource: "configmaps"}]
			t.Logf("%2d writer(s), %-16s: %d/%d succeeded, %d conflicts, %d requests on the wire (%d GET, %d PUT), %.2f per successful update",
				r.writers, st.Name, sum.Succeeded, sum.Updates, sum.Conflicts, sum.Requests, gets, puts, sum.RequestsPerUpdate())

			if sum.Final != sum.Succeeded {
				t.Errorf("%s: counter is %d but %d increments returned nil", st.Name, sum.Final, sum.Succeeded)
			}
			if sum.Succeeded != sum.Updates {
				t.Errorf("%s: %d of %d calls gave up, e.g. %v", st.Name, sum.GaveUp, sum.Updates, firstErr(res))
			}
			// The server's view agrees with the loops': one GET per read,
			// one PUT per attempt (every attempt changes the counter), and
			// nothing else.
			if gets != sum.Gets || puts != sum.Attempts || sum.Requests != gets+puts {
				t.Errorf("%s: the wire saw %v; the loops read %d times in %d attempts", st.Name, res.Requests, sum.Gets, sum.Attempts)
			}
			if r.writers > 1 && sum.Conflicts == 0 {
				t.Errorf("%s: %d writers produced no Conflict", st.Name, r.writers)
			}
			if sum.CurrentModified > 0 {
				t.Errorf("%s: %d calls modified their current", st.Name, sum.CurrentModified)
			}
			r.sums[j] = sum
		}
	}
	for _, r := range runs {
		idiom, uoc, informer := r.sums[0].RequestsPerUpdate(), r.sums[1].RequestsPerUpdate(), r.sums[2].RequestsPerUpdate()
		t.Logf("requests per successful update, %2d writer(s): client-go idiom %.2f, UpdateOnConflict %.2f: ratio %.2fx (from an informer: %.2f, %.2fx)",
			r.writers, idiom, uoc, uoc/idiom, informer, informer/idiom)
	}
	one := struct{ idiom, uoc contention.Summary }{runs[0].sums[0], runs[0].sums[1]}
	if ratio := one.uoc.RequestsPerUpdate() / one.idiom.RequestsPerUpdate(); !(ratio > 0 && ratio <= 0.55) {
		t.Errorf("1 writer: UpdateOnConflict used %.2f requests per update, the idiom %.2f: ratio %.2fx, want at most 0.55x",
			one.uoc.RequestsPerUpdate(), one.idiom.RequestsPerUpdate(), ratio)
	}
}

// firstErr returns the first error a call of r returned, or nil.
func firstErr(r contention.Result) error {
	for _, c := range r.Calls {
		if c.Err != nil {
			return c.Err
		}
	}
	return nil
}

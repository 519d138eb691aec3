package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// The partial-failure tests (issue 27): one backend behind the apiserver
// fails (an aggregated API whose service has no endpoints, a validating
// webhook that cannot be reached) while the rest of the API is fine. One
// controller process with NewBudget() on its transport runs healthy and
// failing workers, beside the same process without a budget, at the same
// time; the requests of each are counted on the wire per class.

// pfClass is what a request of a partial-failure run is for.
type pfClass int

const (
	pfHealthy   pfClass = iota // the healthy workers' ConfigMaps
	pfFailing                  // the failing backend's resource
	pfDiscovery                // the failing group's discovery (/apis/GROUP/VERSION)
	pfOther                    // anything else
	pfClasses
)

func (c pfClass) String() string {
	return [...]string{"healthy", "failing", "discovery", "other"}[c]
}

// pfHeld is how long a request must wait in the budget, between the
// transport above it and the wire below it, to count as held: the
// budget's Hold. A request the budget lets through takes one lock there.
var pfHeld = retry.NewBudget().Hold

// pfSetup is what a partial-failure test runs: its namespace, how its
// requests are classed, its failing workers and how their requests on
// the wire are counted.
type pfSetup struct {
	s         *testserver.Server
	ns        string
	classify  func(*http.Request) pfClass
	failing   []pfWorker
	failingOf func(*pfFigures) int // the failing backend's requests on the wire
}

// pfWorker is a failing worker. newCall returns the call it makes for one
// process in one phase, called again 100ms after each call ends;
// recovered tells an error (nil included) that shows the backend is fixed.
type pfWorker struct {
	name      string
	class     pfClass // pfFailing or pfDiscovery
	newCall   func(t *testing.T, p *pfProcess, ph pfPhase) func(context.Context) error
	recovered func(error) bool
}

// pfPhase is one run of both processes for length, each healthy worker
// calling again pause after its last call ended (1s: quiet; 50ms: busy);
// fix, if set, then removes the failure while the failing workers go on,
// and their recovery is measured.
type pfPhase struct {
	name   string
	pause  time.Duration
	length time.Duration
	fix    func(context.Context) error
}

// pfCall is one call of a worker.
type pfCall struct {
	worker     string
	class      pfClass
	start, end time.Time
	err        error
}

// pfWait is how a request fared in the budget: how long it waited before
// it reached the wire (or before it came back without reaching it),
// whether it was sent, and whether the budget refused it (its error
// matches ErrBudgetExhausted and its context was not done).
type pfWait struct {
	class   pfClass
	start   time.Time
	wait    time.Duration
	sent    bool
	refused bool
}

// pfProcess is one controller process: a clientset, a dynamic client and
// a discovery client over one connection pool of its own, a Budget (or
// none) on its transport between a transport that times each request and
// the wire, counted per class.
type pfProcess struct {
	id     string // p0 without a budget, p1 with one
	name   string
	budget *retry.Budget
	client kubernetes.Interface
	dyn    dynamic.Interface
	disc   *discovery.DiscoveryClient
	wire   [pfClasses]reqcount.Counter

	mu    sync.Mutex
	calls []pfCall
	waits []pfWait
}

type pfStampKey struct{}

// pfStamp is when a request reached the wire, set below the budget.
type pfStamp struct {
	mu      sync.Mutex
	reached time.Time
}

func newPFProcess(t *testing.T, setup *pfSetup, id, name string, budget *retry.Budget) *pfProcess {
	t.Helper()
	p := &pfProcess{id: id, name: name, budget: budget}
	cfg := rest.CopyConfig(setup.s.Config)
	// A dialer of its own: client-go then shares no connection with
	// another process.
	cfg.Dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		var byClass [pfClasses]http.RoundTripper
		for c := range byClass {
			byClass[c] = p.wire[c].Wrap(rt)
		}
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if st, ok := req.Context().Value(pfStampKey{}).(*pfStamp); ok {
				st.mu.Lock()
				if st.reached.IsZero() {
					st.reached = time.Now()
				}
				st.mu.Unlock()
			}
			return byClass[setup.classify(req)].RoundTrip(req)
		})
	})
	if budget != nil {
		cfg.Wrap(budget.WrapTransport)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			st := &pfStamp{}
			start := time.Now()
			resp, err := rt.RoundTrip(req.WithContext(context.WithValue(req.Context(), pfStampKey{}, st)))
			end := time.Now()
			w := pfWait{class: setup.classify(req), start: start, wait: end.Sub(start)}
			st.mu.Lock()
			if w.sent = !st.reached.IsZero(); w.sent {
				w.wait = st.reached.Sub(start)
			}
			st.mu.Unlock()
			w.refused = !w.sent && errors.Is(err, retry.ErrBudgetExhausted) && req.Context().Err() == nil
			p.mu.Lock()
			p.waits = append(p.waits, w)
			p.mu.Unlock()
			return resp, err
		})
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.client, err = kubernetes.NewForConfigAndClient(cfg, hc); err != nil {
		t.Fatal(err)
	}
	if p.dyn, err = dynamic.NewForConfigAndClient(cfg, hc); err != nil {
		t.Fatal(err)
	}
	if p.disc, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, hc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return p
}

func (p *pfProcess) record(c pfCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
}

// sleepUntil waits until at, or until ctx is done.
func sleepUntil(ctx context.Context, at time.Time) {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// healthy runs healthy worker i of p: it updates its own ConfigMap with
// Update from the object it last stored, the next call ph.pause after the
// last one ended, until stop is done. Its calls run under ctx, which
// outlives stop, so a call in flight at the end ends on its own. The
// workers' first calls are spread over the first pause.
func (p *pfProcess) healthy(ctx, stop context.Context, ph pfPhase, cm *corev1.ConfigMap, i int, begin time.Time) {
	cms := p.client.CoreV1().ConfigMaps(cm.Namespace)
	sleepUntil(stop, begin.Add(ph.pause*time.Duration(i)/15))
	for n := 0; stop.Err() == nil; n++ {
		start := time.Now()
		got, err := retry.Update(ctx, retry.DefaultRetry, cms, cm, func(cm *corev1.ConfigMap) error {
			cm.Data = map[string]string{"n": strconv.Itoa(n)}
			return nil
		})
		p.record(pfCall{worker: cm.Name, class: pfHealthy, start: start, end: time.Now(), err: err})
		if err == nil {
			cm = got
		}
		sleepUntil(stop, time.Now().Add(ph.pause))
	}
}

// failing runs a failing worker of p until ctx is done: each call inside
// OnErrorValue(IsTransient) with DefaultBackoff, the next 100ms after it.
func (p *pfProcess) failing(ctx context.Context, name string, class pfClass, call func(context.Context) error) {
	for ctx.Err() == nil {
		start := time.Now()
		_, err := retry.OnErrorValue(ctx, retry.DefaultBackoff, retry.IsTransient, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, call(ctx)
		})
		p.record(pfCall{worker: name, class: class, start: start, end: time.Now(), err: err})
		sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
	}
}

// pfFigures are what one process did during a phase.
type pfFigures struct {
	name                  string
	budget                bool
	healthyCalls          int
	healthyErrs           []error
	healthyRefusedCalls   int // healthy calls whose error matches ErrBudgetExhausted
	p50, p99              time.Duration
	failingCalls          int
	wire                  [pfClasses]reqcount.Counts
	outcomes              [pfClasses]reqcount.Outcomes
	held, refused, unsent [pfClasses]int
	maxWait               [pfClasses]time.Duration
	stats                 retry.BudgetStats
	recovery              map[string]time.Duration // failing worker: from the fix to its first recovered call's end
}

func (f *pfFigures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: healthy %d calls, p50 %v, p99 %v, %d errors (%d refused by the budget); failing %d calls",
		f.name, f.healthyCalls, f.p50.Round(100*time.Microsecond), f.p99.Round(100*time.Microsecond),
		len(f.healthyErrs), f.healthyRefusedCalls, f.failingCalls)
	for c := range pfOther {
		if total(f.wire[c]) == 0 && f.unsent[c] == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  %s on the wire: %s; held %d (max wait in the budget %v), refused %d, unsent %d",
			c, f.outcomes[c], f.held[c], f.maxWait[c].Round(100*time.Microsecond), f.refused[c], f.unsent[c])
	}
	if f.budget {
		fmt.Fprintf(&b, "\n  budget %+v", f.stats)
	}
	return b.String()
}

// snapshot returns p's requests on the wire so far and its budget's
// Stats, to which figures adds the calls.
func (p *pfProcess) snapshot() *pfFigures {
	f := &pfFigures{name: p.name, budget: p.budget != nil, stats: p.budget.Stats()}
	for c := range pfClasses {
		f.wire[c], f.outcomes[c] = p.wire[c].Snapshot(), p.wire[c].Outcomes()
	}
	return f
}

// figures adds to f, p's snapshot at stop, the calls p started and the
// requests its transport was given between begin and stop.
func (p *pfProcess) figures(f *pfFigures, begin, stop time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lat []time.Duration
	for _, c := range p.calls {
		if c.start.Before(begin) || !c.start.Before(stop) {
			continue
		}
		if c.class != pfHealthy {
			f.failingCalls++
			continue
		}
		f.healthyCalls++
		lat = append(lat, c.end.Sub(c.start))
		if c.err != nil {
			f.healthyErrs = append(f.healthyErrs, c.err)
			if errors.Is(c.err, retry.ErrBudgetExhausted) {
				f.healthyRefusedCalls++
			}
		}
	}
	slices.Sort(lat)
	f.p50, f.p99 = contention.Percentile(lat, 50), contention.Percentile(lat, 99)
	for _, w := range p.waits {
		if w.start.Before(begin) || !w.start.Before(stop) {
			continue
		}
		if w.wait >= pfHeld {
			f.held[w.class]++
		}
		if w.refused {
			f.refused[w.class]++
		}
		if !w.sent {
			f.unsent[w.class]++
		}
		f.maxWait[w.class] = max(f.maxWait[w.class], w.wait)
	}
}

// total returns the requests in c.
func total(c reqcount.Counts) int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// runPartial runs ph: a process without a budget and one with NewBudget(),
// each with 15 healthy workers and setup's failing workers, at the same
// time. It returns their figures as of the phase's end, and, when ph has
// a fix, each failing worker's recovery after it.
func runPartial(t *testing.T, setup *pfSetup, ph pfPhase) (none, ours *pfFigures) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	procs := []*pfProcess{
		newPFProcess(t, setup, "p0", "no budget", nil),
		newPFProcess(t, setup, "p1", "NewBudget()", retry.NewBudget()),
	}
	// Each process's healthy ConfigMaps, created before it starts.
	cms := make([][]*corev1.ConfigMap, len(procs))
	for i := range procs {
		for w := range 15 {
			cm, err := setup.s.Client.CoreV1().ConfigMaps(setup.ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-h%02d", ph.name, procs[i].id, w)},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cms[i] = append(cms[i], cm)
		}
	}
	calls := make([][]func(context.Context) error, len(procs))
	for i, p := range procs {
		for _, w := range setup.failing {
			calls[i] = append(calls[i], w.newCall(t, p, ph))
		}
	}

	stop, stopHealthy := context.WithCancel(ctx)
	failCtx, stopFailing := context.WithCancel(ctx)
	var healthy, failing sync.WaitGroup
	begin := time.Now()
	for i, p := range procs {
		for w, cm := range cms[i] {
			healthy.Go(func() { p.healthy(ctx, stop, ph, cm, w, begin) })
		}
		for w, fw := range setup.failing {
			failing.Go(func() { p.failing(failCtx, fw.name, fw.class, calls[i][w]) })
		}
	}
	sleepUntil(ctx, begin.Add(ph.length))
	end := time.Now()
	none, ours = procs[0].snapshot(), procs[1].snapshot()
	// The healthy calls in flight at the end count: wait for them.
	stopHealthy()
	healthy.Wait()
	procs[0].figures(none, begin, end)
	procs[1].figures(ours, begin, end)

	if ph.fix != nil {
		fixed := time.Now()
		if err := ph.fix(ctx); err != nil {
			t.Error(err)
		}
		for _, f := range []*pfFigures{none, ours} {
			f.recovery = map[string]time.Duration{}
		}
		figs := []*pfFigures{none, ours}
		err := poll.Until(ctx, 20*time.Millisecond, 15*time.Second, func() bool {
			done := true
			for i, p := range procs {
				p.mu.Lock()
				for _, w := range setup.failing {
					if _, ok := figs[i].recovery[w.name]; ok {
						continue
					}
					at := -1
					for j, c := range p.calls {
						if c.worker == w.name && c.end.After(fixed) && w.recovered(c.err) {
							at = j
							break
						}
					}
					if at < 0 {
						done = false
						continue
					}
					figs[i].recovery[w.name] = p.calls[at].end.Sub(fixed)
				}
				p.mu.Unlock()
			}
			return done
		})
		if err != nil {
			t.Errorf("the failing workers did not all recover within 15s of the fix: no budget %v, NewBudget() %v", none.recovery, ours.recovery)
		}
	}
	stopFailing()
	failing.Wait()
	return none, ours
}

// checkPartial reports the figures of a phase and checks issue 27's
// targets: the healthy calls with the budget at least 0.9x those without,
// none of them failed, held or refused, the failing backend's requests on
// the wire at most 0.25x those without, and every failing worker back
// within 2s of the fix; the healthy p99 target is a wall-clock ratio,
// asserted only with KUBERETRY_OUTAGE_TARGETS=1.
func checkPartial(t *testing.T, setup *pfSetup, ph pfPhase, none, ours *pfFigures) {
	t.Helper()
	t.Logf("%s, %v:\n%s\n%s", ph.name, ph.length, none, ours)
	for _, f := range []*pfFigures{none, ours} {
		if f.healthyCalls == 0 || f.failingCalls == 0 {
			t.Errorf("%s: %d healthy and %d failing calls: the phase did not run", f.name, f.healthyCalls, f.failingCalls)
		}
		for i, err := range f.healthyErrs {
			if i < 5 {
				t.Errorf("%s: a healthy call failed: %v", f.name, err)
			}
		}
	}
	if setup.failingOf(none) == 0 {
		t.Fatalf("no request of the failing backend on the wire without a budget: the harness made no failure")
	}

	ratio := float64(ours.healthyCalls) / float64(none.healthyCalls)
	t.Logf("healthy calls %d, %.2fx the %d without a budget (target at least 0.9x)", ours.healthyCalls, ratio, none.healthyCalls)
	if ratio < 0.9 {
		t.Errorf("healthy calls with NewBudget() %d, %.2fx the %d without a budget; want at least 0.9x", ours.healthyCalls, ratio, none.healthyCalls)
	}
	if ours.healthyRefusedCalls > 0 || ours.refused[pfHealthy] > 0 {
		t.Errorf("NewBudget() refused healthy requests: %d calls failed with ErrBudgetExhausted, %d requests refused on the wire",
			ours.healthyRefusedCalls, ours.refused[pfHealthy])
	}
	if ours.held[pfHealthy] > 0 {
		t.Errorf("NewBudget() held %d healthy requests %v or longer before the wire (the longest %v); without a budget the longest was %v",
			ours.held[pfHealthy], pfHeld, ours.maxWait[pfHealthy], none.maxWait[pfHealthy])
	}
	refused := 0
	for c := range pfClasses {
		refused += ours.refused[c]
	}
	t.Logf("NewBudget(): the transport above the budget saw %d requests refused (healthy %d), the budget counted %d refusals and %d held",
		refused, ours.refused[pfHealthy], ours.stats.Refused, ours.stats.Held)

	p99Bound := max(2*none.p99, none.p99+50*time.Millisecond)
	t.Logf("healthy p99 %v with NewBudget(), %v without (target at most %v)", ours.p99, none.p99, p99Bound)
	if ours.p99 > p99Bound {
		target(t, "healthy p99 with NewBudget() %v, over max(2x, +50ms) of the %v without a budget (%v)", ours.p99, none.p99, p99Bound)
	}

	fail := float64(setup.failingOf(ours)) / float64(setup.failingOf(none))
	t.Logf("the failing backend's requests on the wire: %d with NewBudget(), %.2fx the %d without (target at most 0.25x)",
		setup.failingOf(ours), fail, setup.failingOf(none))
	if fail > 0.25 {
		t.Errorf("the failing backend's requests on the wire with NewBudget() %d, %.2fx the %d without a budget; want at most 0.25x",
			setup.failingOf(ours), fail, setup.failingOf(none))
	}

	if ph.fix != nil {
		t.Logf("after the fix, each failing worker's first call that recovered ended: no budget %v; NewBudget() %v", none.recovery, ours.recovery)
		for _, w := range setup.failing {
			if d, ok := ours.recovery[w.name]; !ok || d > 2*time.Second {
				t.Errorf("NewBudget(): failing worker %s recovered %v after the fix (ok %v), want within 2s", w.name, d, ok)
			}
		}
	}
}

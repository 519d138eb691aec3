package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry/integration/testenv/ha"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

const (
	// failoverMaxCalls bounds each writer's calls, far above what the
	// run's half minute allows (16 writers on one ConfigMap get some 10
	// calls a second through in all).
	failoverMaxCalls = 2000
	// failoverQuiet is how long a phase must go without a failure on the
	// wire (conflicts aside) before it may end, and failoverRecover bounds
	// its wait for a call to return nil after that.
	failoverQuiet   = time.Second
	failoverRecover = 45 * time.Second
)

// TestFailover has 16 writers each add keys of their own to one ConfigMap
// on an HA control plane: two kube-apiservers on one etcd prefix, on an
// etcd of three members, behind a round-robin load balancer. Each writer
// has a clientset of its own (a connection of its own), so they spread
// over the two apiservers, and each change is an idempotent
// read-change-write through the composition TestFaults uses: an outer
// retry.OnErrorValue with retry.IsTransient around an inner retry.Update
// on the typed ConfigMap client. During
// the run one apiserver is stopped (the balancer takes it out of rotation,
// which resets its connections) and later replaced by a new one on the
// same prefix, put into rotation; then the etcd leader is crashed, and
// started again. Every call must return nil, the ConfigMap must end with
// exactly the keys of all calls, read through either apiserver, and each
// fault must have made requests fail, or the test fails.
func TestFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	cp, err := ha.Start(testserver.BufferLogs(t), ha.Options{APIServers: 2})
	if err != nil {
		t.Fatal(err)
	}
	fig := &failoverFigures{startup: time.Since(began)}

	// The namespace and the ConfigMap through an apiserver directly, so
	// the writers' connections alone go through the balancer, in turn.
	ns := createNamespace(t, cp.Server(0), "failover-")
	const name = "failover"
	if _, err := cp.Server(0).Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}

	// Every writer's requests are counted and classified on the wire, and
	// the last failure (conflicts aside) is kept, to tell when a fault's
	// effect ended.
	wire := &reqcount.Counter{OnDone: fig.noteFailure}
	clients := make([]kubernetes.Interface, faultWriters)
	for i := range clients {
		if clients[i], err = kubernetes.NewForConfig(wire.Config(cp.Config())); err != nil {
			t.Fatal(err)
		}
	}
	w := &faultWorkload{clients: clients, ns: ns, name: name, stop: make(chan struct{}), maxCalls: failoverMaxCalls}
	fig.w, fig.wire = w, wire
	// The figures are logged however the test ends, so a failure shows
	// how far the faults got.
	defer func() { t.Logf("failover on an HA control plane:\n%s", fig) }()
	runStart := time.Now()
	stopWriters := w.run(ctx, faultWriters)
	defer func() {
		cancel()
		stopWriters()
	}()
	hosts := cp.Balancer.Backends()
	faultWaitFor(t, "the writers' connections and first calls", 30*time.Second, func() bool {
		routed := cp.Balancer.Stats().Routed
		fig.spread = [2]int64{routed[hosts[0]], routed[hosts[1]]}
		return fig.spread[0]+fig.spread[1] >= faultWriters && w.done.Load() >= faultWriters
	})
	if fig.spread[0] == 0 || fig.spread[1] == 0 {
		t.Fatalf("the writers' connections went %v to the two apiservers: not spread", fig.spread)
	}

	// Fault 1: apiserver 0 stops, its connections reset by the balancer
	// as it takes the server out of rotation.
	ph := fig.phase(t, "apiserver 1 of 2 stopped: out of rotation, its connections reset", true)
	reset, err := cp.StopServer(0)
	if err != nil {
		t.Fatal(err)
	}
	ph.detail = fmt.Sprintf("%d connections reset; %v to stop it", reset, time.Since(ph.start).Round(100*time.Millisecond))
	ph.end(t)

	// Its replacement, on the same prefix, joins the rotation; the writers
	// go on through the other meanwhile. A new connection reaches it, and
	// it serves the ConfigMap.
	ph = fig.phase(t, "replacement apiserver started, put into rotation", false)
	if err := cp.ReplaceServer(0); err != nil {
		t.Fatal(err)
	}
	started := time.Since(ph.start)
	newHost := cp.Balancer.Backends()[1]
	for try := 0; cp.Balancer.Stats().Routed[newHost] == 0; try++ {
		if try == 4 {
			t.Fatalf("4 new connections through the balancer, none to the replacement %s: %v", newHost, cp.Balancer.Stats().Routed)
		}
		probe, err := kubernetes.NewForConfig(cp.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := probe.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("a probe's read through the balancer: %v", err)
		}
	}
	ph.detail = fmt.Sprintf("ready and in rotation after %v; a new connection read the ConfigMap through it", started.Round(100*time.Millisecond))
	ph.end(t)

	// Fault 2: the etcd leader crashes (no leadership transfer); the two
	// others elect a new one.
	leader, err := cp.Etcd.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ph = fig.phase(t, fmt.Sprintf("etcd leader (member %d of 3) crashed", leader+1), true)
	elected := make(chan string, 1)
	go func() { // the stop may wait seconds for clients' streams; the election does not
		deadline := time.Now().Add(30 * time.Second)
		for {
			next, err := cp.Etcd.Leader(time.Until(deadline))
			switch {
			case err != nil:
				elected <- err.Error()
			case next != leader: // the old one, until the crash
				elected <- fmt.Sprintf("member %d leader after %v", next+1, time.Since(ph.start).Round(100*time.Millisecond))
			default:
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
	}()
	stopped, err := cp.Etcd.StopMember(leader)
	if err != nil {
		t.Fatal(err)
	}
	ph.detail = fmt.Sprintf("%s; %v to stop it", <-elected, stopped.Round(100*time.Millisecond))
	ph.end(t)

	ph = fig.phase(t, fmt.Sprintf("etcd member %d of 3 restarted", leader+1), false)
	if err := cp.Etcd.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	ph.detail = fmt.Sprintf("ready after %v", time.Since(ph.start).Round(100*time.Millisecond))
	ph.end(t)

	stopWriters()
	fig.wall = time.Since(runStart)

	// Every call returned nil, and the ConfigMap holds exactly their
	// keys, through the surviving apiserver and the replacement alike.
	var cms [2]*corev1.ConfigMap
	for i := range cms {
		if cms[i], err = cp.Server(i).Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("read the ConfigMap back through apiserver %d: %v", i+1, err)
		}
	}
	if cms[0].ResourceVersion != cms[1].ResourceVersion || len(cms[0].Data) != len(cms[1].Data) {
		t.Errorf("the apiservers disagree: resourceVersion %s with %d keys, %s with %d",
			cms[0].ResourceVersion, len(cms[0].Data), cms[1].ResourceVersion, len(cms[1].Data))
	}
	fig.outcome = w.check(t, cms[1])

	// Each fault should make requests fail; one that did not bite is
	// said so (in the figures too), and a run in which neither did tested
	// no failover.
	bitten := 0
	for _, ph := range fig.phases {
		if ph.fault && ph.bit() {
			bitten++
		} else if ph.fault {
			t.Logf("%s did not bite: no request failed on the wire", ph.name)
		}
	}
	if bitten == 0 {
		t.Errorf("no fault made a request fail")
	}

	// Both loops had work: the faults reached the outer loop, and the
	// writers contended.
	if transient := w.retries.Load() - int64(w.retried(reqcount.Conflict)); transient == 0 {
		t.Errorf("the outer loop retried nothing: client-go absorbed every fault")
	}
	if w.retried(reqcount.Conflict) == 0 {
		t.Errorf("the inner loop retried no Conflict: %d writers did not contend", faultWriters)
	}
}

// failoverFigures are what TestFailover logs: each phase, and the totals.
type failoverFigures struct {
	w         *faultWorkload
	wire      *reqcount.Counter
	lastFault atomic.Int64 // when the last request that failed, conflicts aside, ended (UnixNano)

	startup time.Duration // the control plane's start
	spread  [2]int64      // the writers' first connections to each apiserver
	phases  []*failoverPhase
	wall    time.Duration // the writers' run

	outcome faultOutcome
}

// noteFailure keeps when r ended if it failed, conflicts aside.
func (f *failoverFigures) noteFailure(r reqcount.Request) {
	if r.Class != reqcount.None && r.Class != reqcount.Conflict {
		f.lastFault.Store(r.End.UnixNano())
	}
}

// lastFailure returns when the last request that failed, conflicts aside,
// ended; zero if none did.
func (f *failoverFigures) lastFailure() time.Time {
	if ns := f.lastFault.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// failoverPhase is what happened from the start of a fault (or of a
// recovery step) until every writer had finished a call begun after it.
type failoverPhase struct {
	f            *failoverFigures
	name, detail string
	fault        bool // it must make requests fail
	start        time.Time

	before    reqcount.Outcomes
	sentFrom  reqcount.Counts
	failed    map[reqcount.Class]int // failures on the wire during the phase, by class
	sent      int                    // ConfigMap requests sent during it
	lastFail  time.Duration          // from the start to the last failure that was not a conflict; 0 for none
	recovered time.Duration          // from the start to the first success after the last failure
	done      bool
	finished  time.Time // when end returned
}

// phase begins a phase named name: a fault (which must make a request
// fail) or a step of recovery. Before a fault it waits for requests in
// flight, so that the fault meets some.
func (f *failoverFigures) phase(t *testing.T, name string, fault bool) *failoverPhase {
	if fault {
		faultWaitFor(t, "requests in flight before "+name, 10*time.Second, func() bool { return f.wire.InFlight() >= 2 })
	}
	ph := &failoverPhase{f: f, name: name, fault: fault, sentFrom: f.wire.Snapshot(), before: f.wire.Outcomes()}
	ph.start = time.Now()
	f.phases = append(f.phases, ph)
	return ph
}

// end waits until the phase is over: failoverQuiet has passed without a
// failure on the wire (conflicts aside), and a call begun after the last
// one has returned nil. It records what the phase did, and fails t unless
// that happens within failoverRecover and, for a fault, unless a request
// other than a conflict failed on the wire meanwhile; a fault that made
// none fail did not bite.
func (ph *failoverPhase) end(t *testing.T) {
	t.Helper()
	if poll.Until(context.Background(), faultPollInterval, failoverRecover, func() bool {
		last := ph.f.lastFailure()
		from := ph.start
		if last.After(from) {
			from = last
		}
		if time.Since(from) < failoverQuiet {
			return false
		}
		end, ok := ph.f.w.firstSuccessAfter(from)
		ph.recovered = end.Sub(ph.start)
		return ok
	}) != nil {
		t.Fatalf("%s: no call returned nil within %v", ph.name, failoverRecover)
	}
	after := ph.f.wire.Outcomes()
	ph.failed = map[reqcount.Class]int{}
	for _, c := range reqcount.Classes() {
		ph.failed[c] = after.Failed(c) - ph.before.Failed(c)
	}
	if last := ph.f.lastFailure(); last.After(ph.start) {
		ph.lastFail = last.Sub(ph.start)
	}
	ph.sent = ph.f.wire.Snapshot().Sub(ph.sentFrom).Resource("configmaps")
	ph.done, ph.finished = true, time.Now()
}

// hit returns the calls that the phase's failures reached their loops in
// (those whose first retry of a transient failure came between its start
// and its end), and how long after its start the last of them returned:
// the time until every call it hit was done.
func (ph *failoverPhase) hit() (int, string) {
	n, last := ph.f.w.hitBetween(ph.start, ph.finished)
	if n == 0 {
		return 0, "-"
	}
	return n, last.Sub(ph.start).Round(100 * time.Millisecond).String()
}

// bit reports whether the phase made a request other than a conflict
// fail on the wire.
func (ph *failoverPhase) bit() bool { return ph.faults() > 0 }

// faults is the number of failures during the phase that were not
// conflicts.
func (ph *failoverPhase) faults() int {
	n := 0
	for c, v := range ph.failed {
		if c != reqcount.Conflict {
			n += v
		}
	}
	return n
}

// classes lists the phase's failures by class, conflicts last.
func (ph *failoverPhase) classes() string {
	var parts []string
	for _, c := range reqcount.Classes() {
		if v := ph.failed[c]; v > 0 && c != reqcount.Conflict {
			parts = append(parts, fmt.Sprintf("%s %d", c, v))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; conflicts %d", ph.failed[reqcount.Conflict])
}

func (f *failoverFigures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "2 apiservers on a 3-member etcd behind a round-robin balancer (started in %v); %d writers, one connection each (%d and %d to the two apiservers)\n",
		f.startup.Round(100*time.Millisecond), faultWriters, f.spread[0], f.spread[1])
	f.outcome.write(&b, len(f.w.calls()), f.wall)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tdetail\trequests\tfailed\tlast failure\twrites again\tcalls hit\tall returned\tfailed by class")
	for _, ph := range f.phases {
		if !ph.done {
			fmt.Fprintf(tw, "%s\t%s\t(not finished)\t\t\t\t\t\n", ph.name, ph.detail)
			continue
		}
		last := "-"
		if ph.lastFail > 0 {
			last = ph.lastFail.Round(100 * time.Millisecond).String()
		}
		name := ph.name
		if ph.fault && !ph.bit() {
			name += " (did not bite: no request failed)"
		}
		hit, returned := ph.hit()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%v\t%d\t%s\t%s\n", name, ph.detail, ph.sent, ph.faults(), last,
			ph.recovered.Round(100*time.Millisecond), hit, returned, ph.classes())
	}
	tw.Flush()
	b.WriteString("(each phase from its start until a second without a failure and a call that returned nil; requests: ConfigMap requests sent in it; " +
		"failed: requests that failed on the wire, conflicts aside; last failure, writes again: after the phase's start, the last such failure " +
		"and the end of the first call begun after it that returned nil; calls hit: calls whose outer IsTransient loop retried in the phase, " +
		"all returned: after the phase's start, when the last of them returned)\n")
	all := f.wire.Snapshot()
	writeFaultClasses(&b, f.wire, f.w, fmt.Sprintf("requests on the wire (reqcount): %d to configmaps (get %d, update %d)",
		all.Resource("configmaps"), all[reqcount.Key{Verb: "get", Resource: "configmaps"}], all[reqcount.Key{Verb: "update", Resource: "configmaps"}]))
	return b.String()
}

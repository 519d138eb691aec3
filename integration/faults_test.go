package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

const (
	// faultWriters write to one ConfigMap at once, through one clientset,
	// as the workers of one controller do.
	faultWriters = 16
	// faultResets is how many times the proxy resets every connection.
	faultResets = 5
	// faultResponseTimeout bounds the wait for each response's headers
	// (the transport's ResponseHeaderTimeout; rest.Config.Timeout would
	// expire as a bare context.DeadlineExceeded, which IsTransient cannot
	// tell from the caller's own deadline), and the proxy holds responses
	// back for at least a second longer, and until a request has timed
	// out awaiting its response headers, for at most faultDelayMax.
	faultResponseTimeout = time.Second
	faultDelay           = faultResponseTimeout + time.Second
	faultDelayMax        = 10 * time.Second
	// faultPollInterval is how often the schedule looks whether what it
	// waits for has happened.
	faultPollInterval = 5 * time.Millisecond
	// faultToken authenticates the writers to both apiservers, the first
	// and the one that replaces it.
	faultToken = "kuberetry-faults"
)

var (
	// faultOuter retries a transient failure of a whole read-change-write
	// for long enough to ride out an apiserver restart: its waits reach
	// the Cap within about 1.5s and then go on at the Cap
	// (WithContinueAtCap), some 1.5 minutes in all.
	faultOuter = retry.Backoff{Steps: 80, Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: time.Second}
	// faultInner retries Conflicts among the 16 writers: many quick
	// attempts, going on at the Cap.
	faultInner = retry.Backoff{Steps: 60, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1.0, Cap: 300 * time.Millisecond}
)

// TestFaults has 16 writers each add keys of their own to one ConfigMap,
// every change an idempotent read-change-write through the composition
// that rides out a failing apiserver: an outer retry.OnErrorValue with
// retry.IsTransient and a long backoff around an inner retry.Update
// (UpdateOnConflict through the typed client, reading first: the object it
// is given is built, without a resourceVersion). The writers reach the apiserver through a
// fault-injecting proxy, which meanwhile resets every open connection 5
// times, switches to a new apiserver started on the same etcd data after
// the first one stopped, and holds every response back for longer than the
// transport waits for one. Every call must return nil and the ConfigMap
// must end with exactly the keys of all calls; each fault must have been
// met by the clients, or the test fails.
func TestFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	certDir := t.TempDir()
	first := startFaultServer(t, testserver.Options{CertDir: certDir, Token: faultToken})
	ns := createNamespace(t, first, "faults-")
	const name = "faults"
	if _, err := first.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}

	proxy, err := faultproxy.New(faultHostOf(t, first.Config.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	// The writers' transport is client-go's own (SetTransportDefaults:
	// HTTP/2 and its health checks), verifying the serving certificate
	// that both apiservers present, with a bound on each response.
	tlsConfig, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: first.ServingCert}})
	if err != nil {
		t.Fatal(err)
	}
	transport := utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:       tlsConfig,
		ResponseHeaderTimeout: faultResponseTimeout,
	})
	defer transport.CloseIdleConnections()
	wire := &reqcount.Counter{}
	client, err := kubernetes.NewForConfig(&rest.Config{
		Host:        "https://" + proxy.Addr(),
		BearerToken: faultToken,
		Transport:   wire.Wrap(transport),
		QPS:         1000,
		Burst:       10000,
	})
	if err != nil {
		t.Fatal(err)
	}

	w := &faultWorkload{clients: []kubernetes.Interface{client}, ns: ns, name: name, stop: make(chan struct{})}
	fig := &faultFigures{wire: wire, w: w, proxy: proxy, start: time.Now()}
	// The figures are logged however the test ends, so a failure shows
	// how far the faults got.
	defer func() { t.Logf("faults against the real apiserver:\n%s", fig) }()
	stopWriters := w.run(ctx, faultWriters)
	// However the schedule ends, the writers stop and are waited for; on
	// a failure, cancel ends their retries at once.
	defer func() {
		cancel()
		stopWriters()
	}()

	// The schedule. Each fault waits for requests in flight, so that it
	// meets the writers rather than an idle connection, and then checks
	// that the clients saw it.
	faultWaitFor(t, "the writers' first calls", 30*time.Second, func() bool { return w.done.Load() >= faultWriters })
	// A reset can go unseen: the connections it finds may carry no
	// request (idle, or being closed by the client), or only requests
	// whose responses the proxy has already passed on, which the client
	// reads before it meets the reset. So each of the faultResets resets
	// is one that made requests fail on the wire; unseen ones are
	// repeated, and counted.
	reset := func(i int) {
		for try := 1; ; try++ {
			before := wire.Outcomes().Failed(faultResetClasses...)
			n := 0
			faultWaitFor(t, fmt.Sprintf("requests in flight for reset %d", i), 10*time.Second, func() bool {
				if wire.InFlight() < 2 || proxy.Open() == 0 {
					return false
				}
				n = proxy.ResetAll() // 0 if the last connection just closed
				return n > 0
			})
			seen := poll.Until(context.Background(), faultPollInterval, time.Second, func() bool { return wire.Outcomes().Failed(faultResetClasses...) > before }) == nil
			fig.resetConns = append(fig.resetConns, n)
			if seen {
				return
			}
			fig.unseenResets++
			if try == 5 {
				t.Fatalf("reset %d: %d tries reset connections, and no client request failed", i, try)
			}
		}
	}
	reset(1)
	reset(2)

	// Responses held for longer than the transport waits for them. The
	// hold starts once a request written from now on awaits its response
	// headers, so on a live connection whose TLS handshake is done.
	// Started while the clients redial after a reset, it would hold their
	// handshakes instead: a request waits for those in its dial, where the
	// response-header timeout does not run (TLSHandshakeTimeout, 10s,
	// does), and goes through once the hold ends, so no request times out.
	// (A request written before now may still await headers on a
	// connection just reset, the reset not yet met.) Once started, the
	// hold lasts faultDelay, and on until a request has timed out awaiting
	// its headers (whatever the writers were doing when it began: waiting
	// in a backoff, or reading a response that passed just before), for at
	// most faultDelayMax.
	mark := time.Now()
	faultWaitFor(t, "a request written on a live connection", 10*time.Second, func() bool { return faultAwaitingWrittenAfter(wire, mark) })
	before := faultHeaderTimeouts(wire)
	holdStart := time.Now()
	proxy.Delay(faultDelayMax)
	timedOut := poll.Until(context.Background(), faultPollInterval, faultDelayMax, func() bool {
		return time.Since(holdStart) >= faultDelay && faultHeaderTimeouts(wire) > before
	}) == nil
	proxy.Release()
	fig.held, fig.heldTimeouts = time.Since(holdStart), faultHeaderTimeouts(wire)-before
	if !timedOut {
		t.Fatalf("responses held %v, and no request timed out awaiting its response headers", fig.held.Round(100*time.Millisecond))
	}

	reset(3)

	// The apiserver restarts: the first one stops, and a new one on the
	// same etcd data, with the same serving certificate and the same token,
	// takes its place behind the proxy's address.
	faultWaitInFlight(t, wire, proxy)
	dialErrorsBefore := proxy.Stats().DialErrors
	restartStart := time.Now()
	first.Stop()
	fig.stop = time.Since(restartStart)
	second := startFaultServer(t, testserver.Options{Prefix: first.Prefix, CertDir: certDir, Token: faultToken})
	doneBefore := w.done.Load()
	proxy.SetBackend(faultHostOf(t, second.Config.Host))
	// A stopped process's connections die with it. An in-process server
	// whose graceful stop ran out of its shutdown timeout (the request
	// timeout, 60s) returns with connections still open and answering
	// "shutting down", which a client would keep using: reset them, as the
	// kernel would. Usually the stop has closed them all.
	fig.leftOpen = proxy.RemoveBackend(faultHostOf(t, first.Config.Host))
	fig.restarts, fig.outage = 1, time.Since(restartStart)
	// With the first server gone, these calls end through the second.
	faultWaitFor(t, "writes through the new apiserver", 30*time.Second, func() bool { return w.done.Load() >= doneBefore+faultWriters })
	fig.outageDialErrors = proxy.Stats().DialErrors - dialErrorsBefore
	// The clients met the restart on a connection that failed, or on one
	// the stopping server kept open (answering "shutting down").
	if fig.outageDialErrors == 0 && fig.leftOpen == 0 {
		t.Errorf("no client connected while the apiserver was down: the outage went unseen")
	}

	reset(4)
	reset(5)

	stopWriters()

	// Every call returned nil, and the ConfigMap holds exactly their keys.
	cm, err := second.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read the ConfigMap back: %v", err)
	}
	fig.outcome = w.check(t, cm)

	// Both loops had work: the faults reached the outer loop, and the
	// writers contended.
	if transient := w.retries.Load() - int64(w.retried(reqcount.Conflict)); transient == 0 {
		t.Errorf("the outer loop retried nothing: client-go absorbed every fault")
	}
	if w.retried(reqcount.Conflict) == 0 {
		t.Errorf("the inner loop retried no Conflict: %d writers did not contend", faultWriters)
	}
	ps := proxy.Stats()
	if want := int64(faultResets + fig.unseenResets); ps.ResetAlls != want || ps.Delays != 1 || ps.HeldChunks == 0 {
		t.Errorf("proxy stats %+v: want %d ResetAlls and 1 Delay that held something back", ps, want)
	}
}

// startFaultServer starts an apiserver for t as startServer does, with opts.
func startFaultServer(t *testing.T, opts testserver.Options) *testserver.Server {
	t.Helper()
	s, err := testserver.StartWithOptions(testserver.BufferLogs(t), etcd, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// faultHostOf returns the host:port of a URL such as a rest.Config's Host.
func faultHostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// faultWaitFor polls cond until it holds, and fails t after timeout.
func faultWaitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if poll.Until(context.Background(), faultPollInterval, timeout, cond) != nil {
		t.Fatalf("waited %v for %s", timeout, what)
	}
}

// faultWaitInFlight waits until requests are on their way through an open
// proxied connection, so that the next fault meets some.
func faultWaitInFlight(t *testing.T, wire *reqcount.Counter, proxy *faultproxy.Proxy) {
	t.Helper()
	faultWaitFor(t, "requests in flight", 10*time.Second, func() bool {
		return wire.InFlight() >= 2 && proxy.Open() > 0
	})
}

// check fails t unless every call returned nil and cm holds exactly the
// keys of the calls, none lost, none extra, and no loop retried an error
// of no known class; it returns what it found.
func (w *faultWorkload) check(t *testing.T, cm *corev1.ConfigMap) faultOutcome {
	t.Helper()
	failed, lost, extra := 0, 0, 0
	want := map[string]string{}
	// Failures grouped by their shape: class, IsTransient's answer and
	// the types in the error's tree; one example of each is printed.
	type shape struct {
		class     reqcount.Class
		transient bool
		types     string
	}
	shapes := map[shape]int{}
	calls := w.calls()
	for _, c := range calls {
		if c.err != nil {
			failed++
			sh := shape{reqcount.ErrClass(c.err), retry.IsTransient(c.err), faultErrTypes(c.err)}
			if shapes[sh] == 0 {
				t.Errorf("writer %d call %d returned (%s, IsTransient %v) %s", c.writer, c.seq, sh.class, sh.transient, faultDescribe(c.err))
			}
			shapes[sh]++
			continue
		}
		want[faultKey(c.writer, c.seq)] = faultValue(c.writer, c.seq)
	}
	if failed > 0 {
		t.Errorf("%d of %d calls returned an error; by shape: %v", failed, len(calls), shapes)
	}
	for k, v := range want {
		if got, ok := cm.Data[k]; !ok || got != v {
			lost++
			if lost <= 5 {
				t.Errorf("key %s: %q (present %v), want %q", k, got, ok, v)
			}
		}
	}
	for k := range cm.Data {
		if _, ok := want[k]; !ok {
			extra++
			if extra <= 5 {
				t.Errorf("key %s is in the ConfigMap but no call that returned nil wrote it", k)
			}
		}
	}
	if lost > 0 || extra > 0 {
		t.Errorf("%d keys lost, %d extra, of %d", lost, extra, len(want))
	}
	for _, err := range w.others() {
		t.Errorf("a loop retried an error of no known class: %s", faultDescribe(err))
	}
	return faultOutcome{checked: true, failed: failed, keys: len(want), lost: lost, extra: extra}
}

func faultKey(writer, seq int) string   { return fmt.Sprintf("writer-%d-%d", writer, seq) }
func faultValue(writer, seq int) string { return fmt.Sprintf("%d.%d", writer, seq) }

// faultFigures are what TestFaults logs: the faults injected and what
// the clients met.
type faultFigures struct {
	wire  *reqcount.Counter
	w     *faultWorkload
	proxy *faultproxy.Proxy
	start time.Time // the writers' start

	resetConns       []int // connections reset by each ResetAll
	unseenResets     int   // ResetAlls that no request met
	restarts         int
	stop, outage     time.Duration // the old server's stop; until the new one serves
	outageDialErrors int64         // connections the proxy could not forward meanwhile
	leftOpen         int           // connections the stopped server left open, reset
	held             time.Duration // how long the delay held responses back
	heldTimeouts     int           // requests that timed out awaiting headers meanwhile

	outcome faultOutcome
}

func (f *faultFigures) String() string {
	var b strings.Builder
	ps := f.proxy.Stats()
	fmt.Fprintf(&b, "%d writers, ", faultWriters)
	f.outcome.write(&b, len(f.w.calls()), time.Since(f.start))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\ttimes\tdetail")
	fmt.Fprintf(tw, "reset of every open connection\t%d\tconnections reset %v; %d more resets met no request\n",
		int(ps.ResetAlls)-f.unseenResets, f.resetConns, f.unseenResets)
	leftOpen := ""
	if f.leftOpen > 0 {
		leftOpen = fmt.Sprintf("; %d left open by the stopped one, reset", f.leftOpen)
	}
	fmt.Fprintf(tw, "apiserver restart, same etcd prefix\t%d\t%v down (%v stopping the old one); %d connections reset meanwhile%s\n",
		f.restarts, f.outage.Round(100*time.Millisecond), f.stop.Round(100*time.Millisecond), f.outageDialErrors, leftOpen)
	fmt.Fprintf(tw, "responses held past the header timeout (%v)\t%d\theld %v (at least %v, until a request timed out); %d requests timed out awaiting headers; %d reads held, %d of them a TLS handshake\n",
		faultResponseTimeout, ps.Delays, f.held.Round(100*time.Millisecond), faultDelay, f.heldTimeouts, ps.HeldChunks, ps.HeldFirst)
	tw.Flush()
	writeFaultClasses(&b, f.wire, f.w, "")
	return b.String()
}

// faultOutcome is what the check of the ConfigMap found.
type faultOutcome struct {
	checked                   bool // the ConfigMap was read back
	failed, keys, lost, extra int
}

// write writes the number of calls and their wall time, and the outcome.
func (o faultOutcome) write(b *strings.Builder, calls int, wall time.Duration) {
	fmt.Fprintf(b, "%d calls in %v; ", calls, wall.Round(100*time.Millisecond))
	if o.checked {
		fmt.Fprintf(b, "calls failed %d; keys %d, lost %d, extra %d\n", o.failed, o.keys, o.lost, o.extra)
	} else {
		b.WriteString("the ConfigMap was not checked: the test stopped before\n")
	}
}

// writeFaultClasses writes the failures by class, on the wire and retried
// by w's loops, what they count, more (if not empty) and one error of each
// class met on the wire.
func writeFaultClasses(b *strings.Builder, wire *reqcount.Counter, w *faultWorkload, more string) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "error class\ton the wire\tretried by the loops\t")
	onWire := wire.Outcomes()
	for _, c := range reqcount.Classes() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", c, onWire.Failed(c), w.retried(c))
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t\n", onWire.Failed(reqcount.Classes()...), w.retries.Load())
	tw.Flush()
	b.WriteString("(on the wire: round trips below client-go, so its own retries of a GET count there and an error while reading a body does not; retried by the loops: the outer IsTransient loop's retries and, for conflicts, the inner Update's)")
	if more != "" {
		b.WriteString("\n" + more)
	}
	for _, c := range reqcount.Classes() {
		if err := wire.FirstErr(c); err != nil {
			fmt.Fprintf(b, "\ne.g. %s on the wire: %s", c, faultDescribe(err))
		}
	}
}

// faultCall is one call of a writer: one key added.
type faultCall struct {
	writer, seq int
	err         error
	start, end  time.Time
	hit         time.Time // when the call first retried a transient failure; zero if never
}

// faultWorkload is the writers' shared state.
type faultWorkload struct {
	// clients are the writers' clientsets: writer i uses
	// clients[i%len(clients)].
	clients  []kubernetes.Interface
	ns, name string
	stop     chan struct{}
	// maxCalls, if positive, bounds each writer's calls.
	maxCalls int

	done    atomic.Int64 // calls that returned
	retries atomic.Int64 // retries by the loops, both kinds

	mu         sync.Mutex
	all        []faultCall
	retriedBy  map[reqcount.Class]int
	unexpected []error // retried errors of class Other
}

// run starts n writers and returns a function that stops them and waits
// for them to return; calling it again does nothing.
func (w *faultWorkload) run(ctx context.Context, n int) (stop func()) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { w.writer(ctx, i) })
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(w.stop)
			wg.Wait()
		})
	}
}

// writer adds keys writer-i-0, writer-i-1, ... until told to stop, or
// until it has made maxCalls calls.
func (w *faultWorkload) writer(ctx context.Context, i int) {
	cms := w.clients[i%len(w.clients)].CoreV1().ConfigMaps(w.ns)
	// Built, not read: Update's first attempt reads it, as every retry does.
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns}}
	for seq := 0; w.maxCalls <= 0 || seq < w.maxCalls; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		key, value := faultKey(i, seq), faultValue(i, seq)
		start := time.Now()
		var hit time.Time // the call's first retry of a transient failure
		onRetry := retry.WithOnRetry(func(ev retry.RetryEvent) {
			if hit.IsZero() && reqcount.ErrClass(ev.Err) != reqcount.Conflict {
				hit = time.Now()
			}
			w.onRetry(ev)
		})
		mutate := func(cm *corev1.ConfigMap) error {
			// Idempotent: a write that landed although its answer was
			// lost is found by the retry, which then writes nothing.
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = value
			return nil
		}
		_, err := retry.OnErrorValue(ctx, faultOuter, retry.IsTransient, func(ctx context.Context) (*corev1.ConfigMap, error) {
			return retry.Update(ctx, faultInner, cms, obj, mutate, onRetry, retry.WithContinueAtCap())
		}, onRetry, retry.WithContinueAtCap())
		w.mu.Lock()
		w.all = append(w.all, faultCall{writer: i, seq: seq, err: err, start: start, end: time.Now(), hit: hit})
		w.mu.Unlock()
		w.done.Add(1)
	}
}

func (w *faultWorkload) onRetry(ev retry.RetryEvent) {
	c := reqcount.ErrClass(ev.Err)
	w.retries.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retriedBy == nil {
		w.retriedBy = map[reqcount.Class]int{}
	}
	w.retriedBy[c]++
	if c == reqcount.Other && len(w.unexpected) < 5 {
		w.unexpected = append(w.unexpected, ev.Err)
	}
}

// firstSuccessAfter returns the end of the first call to return nil
// among those begun at t or later, and whether there is one.
func (w *faultWorkload) firstSuccessAfter(t time.Time) (time.Time, bool) {
	var first time.Time
	for _, c := range w.calls() {
		if c.err == nil && !c.start.Before(t) && (first.IsZero() || c.end.Before(first)) {
			first = c.end
		}
	}
	return first, !first.IsZero()
}

// hitBetween returns the number of calls whose first retry of a transient
// failure came in [from, to), and the end of the last of them.
func (w *faultWorkload) hitBetween(from, to time.Time) (n int, last time.Time) {
	for _, c := range w.calls() {
		if !c.hit.IsZero() && !c.hit.Before(from) && c.hit.Before(to) {
			n++
			if c.end.After(last) {
				last = c.end
			}
		}
	}
	return n, last
}

func (w *faultWorkload) calls() []faultCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]faultCall(nil), w.all...)
}

func (w *faultWorkload) retried(c reqcount.Class) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retriedBy[c]
}

func (w *faultWorkload) others() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.unexpected...)
}

// faultResetClasses are the failures of a request whose connection was
// reset under it.
var faultResetClasses = []reqcount.Class{reqcount.Reset, reqcount.EOF, reqcount.HTTP2Lost, reqcount.HTTP2Closed}

// faultHeaderTimeouts returns the requests that timed out awaiting their
// response headers: written whole, then the client's timeout.
func faultHeaderTimeouts(wire *reqcount.Counter) int {
	return wire.Outcomes().Count(func(o reqcount.Outcome) bool { return o.Class == reqcount.Timeout && o.Written })
}

// faultAwaitingWrittenAfter reports whether a request written after t
// awaits its response headers.
func faultAwaitingWrittenAfter(wire *reqcount.Counter, t time.Time) bool {
	for _, r := range wire.Pending() {
		if r.Wrote.After(t) && r.FirstByte.IsZero() {
			return true
		}
	}
	return false
}

// faultDescribe prints err with the types of the errors in its tree.
func faultDescribe(err error) string {
	return fmt.Sprintf("%v [%s]", err, faultErrTypes(err))
}

func faultErrTypes(err error) string {
	switch e := err.(type) {
	case nil:
		return ""
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return fmt.Sprintf("%T > %s", err, faultErrTypes(inner))
		}
	case interface{ Unwrap() []error }:
		var inner []string
		for _, in := range e.Unwrap() {
			inner = append(inner, faultErrTypes(in))
		}
		return fmt.Sprintf("%T > (%s)", err, strings.Join(inner, ", "))
	}
	return fmt.Sprintf("%T", err)
}

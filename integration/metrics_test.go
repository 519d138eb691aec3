package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// retryMetrics counts what the retry loops do, fed by their hooks
// (WithOnRetry and WithOnDone) instead of a wrapper around every call:
// retries by the reason of the error retried, calls by how they ended,
// and the waits.
type retryMetrics struct {
	retries *prometheus.CounterVec // kuberetry_retries_total{reason}
	calls   *prometheus.CounterVec // kuberetry_calls_total{outcome}
	wait    prometheus.Histogram   // kuberetry_retry_wait_seconds
}

// Reasons of a retry and outcomes of a call, the label values.
var (
	retryReasons = []string{"conflict", "throttled", "server_error", "transport"}
	callOutcomes = []string{"success", "rejected", "exhausted", "context", "budget"}
)

func newRetryMetrics() *retryMetrics {
	m := &retryMetrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kuberetry_retries_total",
			Help: "Retries made by the retry loops, by the reason of the error retried.",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kuberetry_calls_total",
			Help: "Calls of the retry loops, by how they ended.",
		}, []string{"outcome"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kuberetry_retry_wait_seconds",
			Help:    "Waits before a retry.",
			Buckets: prometheus.ExponentialBuckets(0.01, 10, 4), // 10ms to 10s
		}),
	}
	// Every series exists from the start, at 0, so that a rate or an
	// alert on one works before its first event.
	for _, r := range retryReasons {
		m.retries.WithLabelValues(r)
	}
	for _, o := range callOutcomes {
		m.calls.WithLabelValues(o)
	}
	return m
}

// register registers m, and the extra collectors, in reg and returns a
// function that unregisters them.
func (m *retryMetrics) register(reg prometheus.Registerer, extra ...prometheus.Collector) (unregister func(), err error) {
	cs := append([]prometheus.Collector{m.retries, m.calls, m.wait}, extra...)
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return func() {
		for _, c := range cs {
			reg.Unregister(c)
		}
	}, nil
}

// options returns the loop options that feed m, to pass to every loop.
// A loop has one OnRetry hook (a later WithOnRetry replaces an earlier
// one): to log too, call m.retry from a hook of your own.
func (m *retryMetrics) options() []retry.Option {
	return []retry.Option{retry.WithOnRetry(m.retry), retry.WithOnDone(m.done)}
}

// retry counts one retry and its wait.
func (m *retryMetrics) retry(ev retry.RetryEvent) {
	m.retries.WithLabelValues(retryReason(ev.Err)).Inc()
	m.wait.Observe(ev.Delay.Seconds())
}

// done counts one call by its outcome.
func (m *retryMetrics) done(ev retry.DoneEvent) {
	m.calls.WithLabelValues(callOutcome(ev)).Inc()
}

// callOutcome names how a loop ended: success; budget (a Budget refused a
// retry); exhausted (no attempt left); context (the caller's context
// ended it); rejected (an error the loop does not retry).
func callOutcome(ev retry.DoneEvent) string {
	switch {
	case ev.Err == nil:
		return "success"
	case errors.Is(ev.Err, retry.ErrBudgetExhausted):
		return "budget"
	case ev.Exhausted:
		return "exhausted"
	case errors.Is(ev.Err, context.Canceled), errors.Is(ev.Err, context.DeadlineExceeded):
		return "context"
	default:
		return "rejected"
	}
}

// retryReason names the kind of error retried: conflict (409), throttled
// (429), server_error (5xx) or, for anything else a loop retries (a
// reset, a timeout), transport.
func retryReason(err error) string {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsTooManyRequests(err):
		return "throttled"
	case errors.As(err, &status) && status.Status().Code >= 500:
		return "server_error"
	default:
		return "transport"
	}
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

// metricsSequence runs a known sequence of calls with m's options and the
// sleeper s, and returns what each returned. Backoff: 3 attempts, waits of
// 100ms and 200ms, no jitter.
func metricsSequence(ctx context.Context, m *retryMetrics, s retry.Sleeper, budget *retry.Budget) []error {
	b := retry.Backoff{Steps: 3, Duration: 100 * time.Millisecond, Factor: 2}
	opts := append(m.options(), retry.WithSleeper(s))
	conflict := apierrors.NewConflict(configMaps, "x", errors.New("the object has been modified"))
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	throttled := apierrors.NewTooManyRequests("slow down", 1)
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	// failing returns fn that fails with errs in turn, then succeeds.
	failing := func(errs ...error) func(context.Context) error {
		return func(context.Context) error {
			if len(errs) == 0 {
				return nil
			}
			err := errs[0]
			errs = errs[1:]
			return err
		}
	}
	var errs []error
	call := func(ctx context.Context, retriable func(error) bool, fn func(context.Context) error, more ...retry.Option) {
		errs = append(errs, retry.OnErrorWithContext(ctx, b, retriable, fn, append(opts, more...)...))
	}
	// 1. success at once.
	call(ctx, retry.IsTransient, failing())
	// 2. a Conflict, retried after 100ms, then success.
	errs = append(errs, retry.RetryOnConflictWithContext(ctx, b, failing(conflict), opts...))
	// 3. NotFound: not retried.
	call(ctx, retry.IsTransient, failing(apierrors.NewNotFound(configMaps, "x")))
	// 4. 503 three times: retried after 100ms and 200ms, then exhausted.
	call(ctx, retry.IsTransient, failing(unavailable, unavailable, unavailable))
	// 5. 429, retried, and the caller cancels during the 100ms wait.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	call(cctx, retry.IsTransient, failing(throttled, throttled), retry.WithSleeper(sleeperFunc(func(d time.Duration) {
		cancel()
		s.Sleep(d)
	})))
	// 6. A reset, retried after 100ms, then success.
	call(ctx, retry.IsTransient, failing(reset))
	// 7. A reset, and budget, which must allow no retry: refused.
	call(ctx, retry.IsTransient, failing(reset), retry.WithBudget(budget))
	return errs
}

type sleeperFunc func(time.Duration)

func (f sleeperFunc) Sleep(d time.Duration) { f(d) }

// TestMetrics runs a known sequence of calls with the hooks wired to
// Prometheus metrics registered in controller-runtime's metrics.Registry,
// and reads the values back from that registry.
func TestMetrics(t *testing.T) {
	m := newRetryMetrics()
	clock := clocktesting.NewFakeClock(time.Now())
	budget := &retry.Budget{Window: time.Second, Clock: clock} // no retry at all
	unregister, err := m.register(metrics.Registry, ctrlretry.BudgetMetrics(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	start := clock.Now()
	errs := metricsSequence(t.Context(), m, clock, budget)

	// What each call returned, as the sequence promises.
	checks := []struct {
		what string
		ok   bool
	}{
		{"success", errs[0] == nil},
		{"success after a Conflict", errs[1] == nil},
		{"NotFound", apierrors.IsNotFound(errs[2])},
		{"the last 503", apierrors.IsServiceUnavailable(errs[3])},
		{"Canceled and the 429", errors.Is(errs[4], context.Canceled) && apierrors.IsTooManyRequests(errs[4])},
		{"success after a reset", errs[5] == nil},
		{"a refusal and the reset", errors.Is(errs[6], retry.ErrBudgetExhausted) && errors.Is(errs[6], syscall.ECONNRESET)},
	}
	for i, c := range checks {
		if !c.ok {
			t.Errorf("call %d returned %v, want %s", i+1, errs[i], c.what)
		}
	}
	// Every wait went through the fake clock: 100ms+100+200+100+100.
	if slept := clock.Since(start); slept != 600*time.Millisecond {
		t.Errorf("the fake clock advanced %v, want 600ms", slept)
	}

	want := `
# HELP kuberetry_budget_first_attempts_total First attempts the retry budget counted, probes included.
# TYPE kuberetry_budget_first_attempts_total counter
kuberetry_budget_first_attempts_total 1
# HELP kuberetry_budget_held_total First attempts that waited for a hold of the retry budget.
# TYPE kuberetry_budget_held_total counter
kuberetry_budget_held_total 0
# HELP kuberetry_budget_probes_total First attempts the retry budget sent as probes during a hold.
# TYPE kuberetry_budget_probes_total counter
kuberetry_budget_probes_total 0
# HELP kuberetry_budget_refused_total Retries the retry budget refused, and calls without a context refused during a hold.
# TYPE kuberetry_budget_refused_total counter
kuberetry_budget_refused_total 1
# HELP kuberetry_budget_retries_total Retries the retry budget granted.
# TYPE kuberetry_budget_retries_total counter
kuberetry_budget_retries_total 0
# HELP kuberetry_calls_total Calls of the retry loops, by how they ended.
# TYPE kuberetry_calls_total counter
kuberetry_calls_total{outcome="budget"} 1
kuberetry_calls_total{outcome="context"} 1
kuberetry_calls_total{outcome="exhausted"} 1
kuberetry_calls_total{outcome="rejected"} 1
kuberetry_calls_total{outcome="success"} 3
# HELP kuberetry_retries_total Retries made by the retry loops, by the reason of the error retried.
# TYPE kuberetry_retries_total counter
kuberetry_retries_total{reason="conflict"} 1
kuberetry_retries_total{reason="server_error"} 2
kuberetry_retries_total{reason="throttled"} 1
kuberetry_retries_total{reason="transport"} 1
# HELP kuberetry_retry_wait_seconds Waits before a retry.
# TYPE kuberetry_retry_wait_seconds histogram
kuberetry_retry_wait_seconds_bucket{le="0.01"} 0
kuberetry_retry_wait_seconds_bucket{le="0.1"} 4
kuberetry_retry_wait_seconds_bucket{le="1"} 5
kuberetry_retry_wait_seconds_bucket{le="10"} 5
kuberetry_retry_wait_seconds_bucket{le="+Inf"} 5
kuberetry_retry_wait_seconds_sum 0.6
kuberetry_retry_wait_seconds_count 5
`
	if err := testutil.GatherAndCompare(metrics.Registry, strings.NewReader(want),
		"kuberetry_calls_total", "kuberetry_retries_total", "kuberetry_retry_wait_seconds",
		"kuberetry_budget_first_attempts_total", "kuberetry_budget_retries_total", "kuberetry_budget_refused_total",
		"kuberetry_budget_held_total", "kuberetry_budget_probes_total"); err != nil {
		t.Errorf("metrics read back from the registry:\n%v", err)
	}
}

// Example_metrics wires the loops' hooks to Prometheus metrics in
// controller-runtime's registry, and to a logr line per retry, with no
// wrapper around the calls.
func Example_metrics() {
	m := newRetryMetrics()
	// One Budget for every loop (and, through cfg.Wrap(budget.WrapTransport),
	// every request) of the process, its Stats beside the loops' metrics.
	budget := retry.NewBudget()
	unregister, err := m.register(metrics.Registry, ctrlretry.BudgetMetrics(budget))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unregister()
	// A logger that prints V(1) lines, as a controller's would at -v=1.
	logger := funcr.New(func(prefix, args string) { fmt.Println(args) }, funcr.Options{Verbosity: 1})
	opts := []retry.Option{
		retry.WithOnRetry(func(ev retry.RetryEvent) {
			m.retry(ev)
			logger.V(1).Info("retrying", "attempt", ev.Attempt, "delay", ev.Delay, "reason", retryReason(ev.Err), "error", ev.Err)
		}),
		retry.WithOnDone(m.done),
		retry.WithBudget(budget),
		retry.WithSleeper(clocktesting.NewFakeClock(time.Time{})), // no real waits in an example
	}
	conflict := apierrors.NewConflict(configMaps, "app", errors.New("the object has been modified"))
	// DefaultBackoff without its jitter, so the example's waits are exact.
	b := retry.Backoff{Steps: 4, Duration: 10 * time.Millisecond, Factor: 5}
	tries := 0
	err = retry.RetryOnConflictWithContext(context.Background(), b, func(context.Context) error {
		if tries++; tries < 3 {
			return conflict
		}
		return nil
	}, opts...)
	fmt.Println("returned:", err)

	families, _ := metrics.Registry.Gather()
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "kuberetry_") {
			continue
		}
		for _, s := range f.GetMetric() {
			switch {
			case s.GetCounter().GetValue() > 0 && len(s.GetLabel()) == 0:
				fmt.Printf("%s %v\n", f.GetName(), s.GetCounter().GetValue())
			case s.GetCounter().GetValue() > 0:
				fmt.Printf("%s{%s} %v\n", f.GetName(), s.GetLabel()[0].GetValue(), s.GetCounter().GetValue())
			case s.GetHistogram() != nil:
				fmt.Printf("%s count %d sum %.3fs\n", f.GetName(), s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum())
			}
		}
	}
	// Output:
	// "level"=1 "msg"="retrying" "attempt"=1 "delay"="10ms" "reason"="conflict" "error"="Operation cannot be fulfilled on configmaps \"app\": the object has been modified"
	// "level"=1 "msg"="retrying" "attempt"=2 "delay"="50ms" "reason"="conflict" "error"="Operation cannot be fulfilled on configmaps \"app\": the object has been modified"
	// returned: <nil>
	// kuberetry_budget_first_attempts_total 1
	// kuberetry_budget_retries_total 2
	// kuberetry_calls_total{success} 1
	// kuberetry_retries_total{conflict} 2
	// kuberetry_retry_wait_seconds count 2 sum 0.060s
}

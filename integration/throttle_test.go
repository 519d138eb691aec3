package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// clientGoMaxRetries is rest.Request's default MaxRetries in client-go
// v0.37.2 (rest/request.go): a typed clientset call retries a 429 or 5xx
// response that carries Retry-After up to this many times by itself.
const clientGoMaxRetries = 10

// statuses summarizes reqs, e.g. "11 requests: 11 x 429".
func statuses(reqs []reqcount.Request) string {
	count := map[int]int{}
	var order []int
	for _, r := range reqs {
		if count[r.Code] == 0 {
			order = append(order, r.Code)
		}
		count[r.Code]++
	}
	parts := make([]string, 0, len(order))
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d x %d", count[s], s))
	}
	noun := "requests"
	if len(reqs) == 1 {
		noun = "request"
	}
	return fmt.Sprintf("%d %s: %s", len(reqs), noun, strings.Join(parts, ", "))
}

// countingClient returns a standard typed clientset acting as writerUser,
// with client-go's default QPS, Burst and per-request MaxRetries, whose
// requests are recorded, each one kept, below client-go, where its own
// retries are visible, in the returned log.
func countingClient(t *testing.T, s *testserver.Server) (kubernetes.Interface, *reqcount.Counter) {
	t.Helper()
	log := &reqcount.Counter{KeepRequests: true}
	cfg := log.Config(s.Impersonate(writerUser))
	cfg.QPS, cfg.Burst = 0, 0 // client-go's defaults (5, 10)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, log
}

// checkAllThrottled checks that reqs are want requests, each answered 429
// with the server's Retry-After, and that the client waited at least that
// long after each 429 before it sent the next request.
func checkAllThrottled(t *testing.T, name string, reqs []reqcount.Request, want int) {
	t.Helper()
	if len(reqs) != want {
		t.Errorf("%s: %s, want %d requests", name, statuses(reqs), want)
	}
	ra := fmt.Sprint(int(serverRetryAfter / time.Second))
	for i, r := range reqs {
		if r.Code != http.StatusTooManyRequests || r.RetryAfter != ra {
			t.Errorf("%s: request %d answered %d with Retry-After %q, want 429 with %q", name, i+1, r.Code, r.RetryAfter, ra)
		}
		if i > 0 {
			if gap := r.Start.Sub(reqs[i-1].End); gap < serverRetryAfter {
				t.Errorf("%s: request %d sent %v after the 429 before it, sooner than the server's Retry-After %v", name, i+1, gap, serverRetryAfter)
			}
		}
	}
}

// checkTooMany checks that err is the server's 429 with its Retry-After.
func checkTooMany(t *testing.T, name string, err error) {
	t.Helper()
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("%s: returned %v, want the 429", name, err)
		return
	}
	if ra, ok := retry.RetryAfter(err); !ok || ra != serverRetryAfter {
		t.Errorf("%s: RetryAfter(err) = %v, %v; want %v, true", name, ra, ok, serverRetryAfter)
	}
}

// TestThrottleTypedClientRetries measures how many requests one call sends
// to a throttled apiserver through a standard typed clientset, with and
// without OnRetryAfterError around it, and through a RESTClient request
// with MaxRetries(0).
//
// A create whose body is held back keeps the server's only mutating slot
// busy, so every other create is answered 429 with Retry-After: 1 at once,
// for as long as the test needs. While the slot is held, four calls run
// side by side, each through a client of its own that counts its requests
// on the wire:
//
//   - a typed Create alone: client-go retries the 429 itself, 10 times, so
//     11 requests about 1s apart, then it returns the 429;
//   - a typed Create inside OnRetryAfterError with Steps 2: 2 x 11 = 22
//     requests, the load multiplied by the loop's Steps;
//   - a RESTClient create with MaxRetries(0) alone: 1 request, the 429 back
//     at once;
//   - the same inside OnRetryAfterError with DefaultRetryAfterBackoff: one
//     request per attempt, DefaultRetryAfterBackoff.Steps in all.
//
// Then a fifth, a typed Create alone, sees the slot freed after its second
// 429 and gets through on its third request, with no loop around it.
func TestThrottleTypedClientRetries(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	s := startServer(t, throttled...)
	ns := createNamespace(t, s, "throttle-")
	probe := writerClient(t, s, ns, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	typedAlone, typedAloneLog := countingClient(t, s)
	typedLoop, typedLoopLog := countingClient(t, s)
	restAlone, restAloneLog := countingClient(t, s)
	restLoop, restLoopLog := countingClient(t, s)
	freed, freedLog := countingClient(t, s)
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	create := func(ctx context.Context, c kubernetes.Interface, name string) error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm(name), metav1.CreateOptions{})
		return err
	}

	release := holdMutatingSlot(t, s.Impersonate(writerUser), ns, probe)
	defer release()
	held := time.Now()

	loopBackoff := retry.Backoff{Steps: 2, Duration: time.Second, Factor: 1}
	var (
		wg                            sync.WaitGroup
		typedAloneErr, typedLoopErr   error
		restAloneErr, restLoopErr     error
		typedLoopPerCall, restPerCall []int
		typedLoopWaits, restLoopWaits int
		typedAloneTook, typedLoopTook time.Duration
	)
	wg.Go(func() {
		start := time.Now()
		typedAloneErr = create(ctx, typedAlone, "typed-alone")
		typedAloneTook = time.Since(start)
	})
	wg.Go(func() {
		start := time.Now()
		typedLoopErr = retry.OnRetryAfterErrorWithContext(ctx, loopBackoff, retry.IsRetryAfterError,
			func(ctx context.Context) error {
				before := len(typedLoopLog.Requests())
				err := create(ctx, typedLoop, "typed-loop")
				typedLoopPerCall = append(typedLoopPerCall, len(typedLoopLog.Requests())-before)
				return err
			},
			retry.WithOnRetry(func(retry.RetryEvent) { typedLoopWaits++ }))
		typedLoopTook = time.Since(start)
	})
	wg.Go(func() {
		restAloneErr = createConfigMap(ctx, restAlone, ns, cm("rest-alone"))
	})
	wg.Go(func() {
		restLoopErr = retry.OnRetryAfterErrorWithContext(ctx, retry.DefaultRetryAfterBackoff, retry.IsRetryAfterError,
			func(ctx context.Context) error {
				before := len(restLoopLog.Requests())
				err := createConfigMap(ctx, restLoop, ns, cm("rest-loop"))
				restPerCall = append(restPerCall, len(restLoopLog.Requests())-before)
				return err
			},
			retry.WithOnRetry(func(retry.RetryEvent) { restLoopWaits++ }))
	})
	wg.Wait()

	// Each typed call sends 1 request and up to clientGoMaxRetries more.
	perTypedCall := 1 + clientGoMaxRetries
	typedAloneReqs := typedAloneLog.Requests()
	typedLoopReqs := typedLoopLog.Requests()
	restAloneReqs := restAloneLog.Requests()
	restLoopReqs := restLoopLog.Requests()
	total429 := 0
	for _, reqs := range [][]reqcount.Request{typedAloneReqs, typedLoopReqs, restAloneReqs, restLoopReqs} {
		for _, r := range reqs {
			if r.Code == http.StatusTooManyRequests {
				total429++
			}
		}
	}
	if total429 == 0 {
		t.Fatal("the server answered no request with 429: nothing was throttled, so nothing was tested")
	}

	t.Logf("typed Create alone: %s in %v; returned %v", statuses(typedAloneReqs), typedAloneTook.Round(time.Millisecond), typedAloneErr)
	checkTooMany(t, "typed Create alone", typedAloneErr)
	checkAllThrottled(t, "typed Create alone", typedAloneReqs, perTypedCall)

	t.Logf("typed Create in OnRetryAfterError (Steps %d): %s in %v (per call %v, %d loop waits); returned %v",
		loopBackoff.Steps, statuses(typedLoopReqs), typedLoopTook.Round(time.Millisecond), typedLoopPerCall, typedLoopWaits, typedLoopErr)
	checkTooMany(t, "typed Create in OnRetryAfterError", typedLoopErr)
	checkAllThrottled(t, "typed Create in OnRetryAfterError", typedLoopReqs, loopBackoff.Steps*perTypedCall)
	if len(typedLoopPerCall) != loopBackoff.Steps || typedLoopWaits != loopBackoff.Steps-1 {
		t.Errorf("typed Create in OnRetryAfterError: %d calls and %d loop waits, want %d and %d",
			len(typedLoopPerCall), typedLoopWaits, loopBackoff.Steps, loopBackoff.Steps-1)
	}
	for i, n := range typedLoopPerCall {
		if n != perTypedCall {
			t.Errorf("typed Create in OnRetryAfterError: call %d sent %d requests, want %d", i+1, n, perTypedCall)
		}
	}

	t.Logf("RESTClient create with MaxRetries(0) alone: %s; returned %v", statuses(restAloneReqs), restAloneErr)
	checkTooMany(t, "MaxRetries(0) create alone", restAloneErr)
	checkAllThrottled(t, "MaxRetries(0) create alone", restAloneReqs, 1)

	steps := retry.DefaultRetryAfterBackoff.Steps
	t.Logf("RESTClient create with MaxRetries(0) in OnRetryAfterError (DefaultRetryAfterBackoff, Steps %d): %s (per call %v, %d loop waits); returned %v",
		steps, statuses(restLoopReqs), restPerCall, restLoopWaits, restLoopErr)
	checkTooMany(t, "MaxRetries(0) create in OnRetryAfterError", restLoopErr)
	checkAllThrottled(t, "MaxRetries(0) create in OnRetryAfterError", restLoopReqs, steps)
	if len(restPerCall) != steps || restLoopWaits != steps-1 {
		t.Errorf("MaxRetries(0) create in OnRetryAfterError: %d calls and %d loop waits, want %d and %d",
			len(restPerCall), restLoopWaits, steps, steps-1)
	}

	// The slot was held throughout: no create got through.
	for _, name := range []string{"typed-alone", "typed-loop", "rest-alone", "rest-loop"} {
		_, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s: got %v, want NotFound: a throttled create was stored", name, err)
		}
	}

	// A typed Create alone that the server stops throttling after its
	// second 429: the slot is freed in the second it waits, so its third
	// request gets through.
	const freeAfter = 2
	second429 := make(chan struct{})
	// Called as each request ends, the 429s counted so far include it;
	// the client sends one request at a time.
	freedLog.OnDone = func(r reqcount.Request) {
		if r.Code != http.StatusTooManyRequests {
			return
		}
		if n := freedLog.Outcomes().Count(func(o reqcount.Outcome) bool { return o.Code == http.StatusTooManyRequests }); n == freeAfter {
			close(second429)
		}
	}
	freedErr := make(chan error, 1)
	freedStart := time.Now()
	go func() { freedErr <- create(ctx, freed, "freed") }()
	select {
	case <-second429:
	case err := <-freedErr:
		t.Fatalf("typed Create returned %v before its second 429", err)
	}
	release()
	released := time.Now()
	err := <-freedErr
	freedReqs := freedLog.Requests()
	t.Logf("typed Create alone, slot freed after %d 429s: %s in %v; returned %v", freeAfter, statuses(freedReqs), time.Since(freedStart).Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("typed Create after the slot was freed: %v", err)
	}
	if len(freedReqs) != freeAfter+1 {
		t.Errorf("typed Create after the slot was freed: %s, want %d requests", statuses(freedReqs), freeAfter+1)
	} else {
		checkAllThrottled(t, "typed Create before the slot was freed", freedReqs[:freeAfter], freeAfter)
		if last := freedReqs[freeAfter]; last.Code != http.StatusCreated || last.Start.Before(released) {
			t.Errorf("typed Create: last request answered %d, sent %v after the slot was freed; want 201, after", last.Code, last.Start.Sub(released))
		}
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "freed", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap freed: %v", err)
	}

	for _, r := range freedReqs {
		if r.Code == http.StatusTooManyRequests {
			total429++
		}
	}
	t.Logf("%d 429s in all; slot held %v; test took %v (server start included)",
		total429, released.Sub(held).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	t.Logf("bound with DefaultRetryAfterBackoff around a typed call: %d x %d = %d requests",
		perTypedCall, steps, perTypedCall*steps)
}

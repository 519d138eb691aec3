package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/kuberetry/retry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
)

// store holds one object the way an API server does: an update must carry the
// resourceVersion it read, or it fails with a 409 Conflict.
type store struct {
	resourceVersion int
	count           int
}

func (s *store) get() (resourceVersion, count int) { return s.resourceVersion, s.count }

func (s *store) update(resourceVersion, count int) error {
	if resourceVersion != s.resourceVersion {
		return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "counter",
			errors.New("the object has been modified"))
	}
	s.resourceVersion++
	s.count = count
	return nil
}

func ExampleRetryOnConflict() {
	s := &store{}
	attempts := 0
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		attempts++
		rv, count := s.get() // read afresh on every attempt
		if attempts <= 2 {
			_ = s.update(rv, 100) // another writer gets in first
		}
		return s.update(rv, count+1)
	},
		retry.WithSleeper(clk),                        // a fake clock: nothing sleeps
		retry.WithRand(func() float64 { return 0.5 }), // fixed jitter: 10ms + 0.5*0.1*10ms
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, apierrors.ReasonForError(e.Err), e.Delay)
		}),
	)
	fmt.Println("err:", err, "count:", s.count, "attempts:", attempts)
	// Output:
	// attempt 1: Conflict; waiting 10.5ms
	// attempt 2: Conflict; waiting 10.5ms
	// err: <nil> count: 101 attempts: 3
}

func ExampleOnRetryAfterError() {
	// The server throttles the first two writes, asking for 2s and then 1s.
	replies := []error{
		apierrors.NewTooManyRequests("the server is busy", 2),
		apierrors.NewTooManyRequests("the server is busy", 1),
		nil,
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()

	err := retry.OnRetryAfterError(retry.DefaultRetryAfterBackoff, retry.IsRetryAfterError, func() error {
		err := replies[0]
		replies = replies[1:]
		return err
	},
		retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v, server asks %v; waiting %v\n", e.Attempt, apierrors.ReasonForError(e.Err), e.RetryAfter, e.Delay)
		}),
	)
	fmt.Println("err:", err, "slept:", clk.Since(start))
	// Output:
	// attempt 1: TooManyRequests, server asks 2s; waiting 2s
	// attempt 2: TooManyRequests, server asks 1s; waiting 1s
	// err: <nil> slept: 3s
}

func ExampleOnErrorWithContext() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	unavailable := apierrors.NewServiceUnavailable("etcd is down")

	err := retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2}, apierrors.IsServiceUnavailable,
		func(ctx context.Context) error { return unavailable },
		retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d failed; waiting %v\n", e.Attempt, e.Delay)
			if e.Attempt == 3 {
				cancel() // the controller shuts down during this wait
			}
		}),
	)
	fmt.Println(err)
	fmt.Println("canceled:", errors.Is(err, context.Canceled), "unavailable:", apierrors.IsServiceUnavailable(err), "slept:", clk.Since(start))
	// Output:
	// attempt 1 failed; waiting 1s
	// attempt 2 failed; waiting 2s
	// attempt 3 failed; waiting 4s
	// retry: context canceled after 3 attempts, last error: etcd is down
	// canceled: true unavailable: true slept: 7s
}

func ExampleBackoff_Step() {
	b := retry.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 50 * time.Millisecond}
	for range 5 {
		d := b.Step()
		fmt.Printf("wait %v, then Duration %v, Steps %d\n", d, b.Duration, b.Steps)
	}
	// Output:
	// wait 10ms, then Duration 20ms, Steps 4
	// wait 20ms, then Duration 40ms, Steps 3
	// wait 40ms, then Duration 50ms, Steps 0
	// wait 50ms, then Duration 50ms, Steps 0
	// wait 50ms, then Duration 50ms, Steps 0
}

func ExampleParseRetryAfter() {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, v := range []string{"120", " 007\t", "Wed, 21 Oct 2015 07:28:30 GMT", "Wed, 21 Oct 2015 07:00:00 GMT", "+5", "1.5"} {
		d, ok := retry.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// " 007\t": 7s true
	// "Wed, 21 Oct 2015 07:28:30 GMT": 30s true
	// "Wed, 21 Oct 2015 07:00:00 GMT": 0s true
	// "+5": 0s false
	// "1.5": 0s false
}

func ExampleUpdateOnConflict() {
	ctx := context.Background()
	api := newCounters("jobs")
	cached, _ := api.Get(ctx, "jobs") // what an informer's lister holds
	api.touch("jobs")                 // another writer gets in: the cache is now stale
	api.gets = 0

	get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
	claim := func(c *Counter) error { // idempotent: changes nothing the second time
		c.Owner = "controller-a"
		return nil
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []retry.Option{
		retry.WithSleeper(clk),
		retry.WithRand(func() float64 { return 0 }), // no jitter: 10ms
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, apierrors.ReasonForError(e.Err), e.Delay)
		}),
	}

	obj, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, cached, get, claim, api.Update, opts...)
	fmt.Printf("err: %v; owner %q, count %d, resourceVersion %s\n", err, obj.Owner, obj.Count, obj.ResourceVersion)
	fmt.Printf("requests: %d get, %d update; the cached object is untouched: owner %q\n", api.gets, api.updates, cached.Owner)

	// The same call on the object it returned: nothing to change, no request.
	api.gets, api.updates = 0, 0
	again, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, obj, get, claim, api.Update, opts...)
	fmt.Printf("again: err %v, resourceVersion %s, requests: %d get, %d update\n", err, again.ResourceVersion, api.gets, api.updates)
	// Output:
	// attempt 1: Conflict; waiting 10ms
	// err: <nil>; owner "controller-a", count 100, resourceVersion 3
	// requests: 1 get, 2 update; the cached object is untouched: owner ""
	// again: err <nil>, resourceVersion 3, requests: 0 get, 0 update
}

func ExampleObject() {
	// Only an object that carries a resourceVersion is changed without a
	// read. The zero Object (a nil pointer) and an object the caller built
	// (a name, no resourceVersion) are read with get first, so the built
	// object's Count of 0 is never written over the stored one.
	ctx := context.Background()
	api := newCounters("jobs")
	get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
	increment := func(c *Counter) error { c.Count++; return nil }
	write := func(what string, current *Counter) *Counter {
		api.gets, api.updates = 0, 0
		obj, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, current, get, increment, api.Update)
		fmt.Printf("%s: err %v, count %d; requests: %d get, %d update\n", what, err, obj.Count, api.gets, api.updates)
		return obj
	}
	write("nil", nil)
	stored := write("built", &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}})
	write("stored", stored) // the object the last write returned
	// Output:
	// nil: err <nil>, count 1; requests: 1 get, 1 update
	// built: err <nil>, count 2; requests: 1 get, 1 update
	// stored: err <nil>, count 3; requests: 0 get, 1 update
}

func ExampleCreateOrUpdate() {
	// Two reconcilers race to create the same object: the other one's create
	// lands between this one's get and create.
	ctx := context.Background()
	api := newCounters() // nothing stored yet
	api.beforeCreate = func() {
		if api.creates == 1 {
			api.version++
			api.objs["jobs"] = &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: strconv.Itoa(api.version)}, Count: 5}
		}
	}
	desired := &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}} // names the object
	get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
	claim := func(c *Counter) error { // sets the state it wants, on either path
		c.Owner = "controller-a"
		return nil
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []retry.Option{
		retry.WithSleeper(clk),
		retry.WithRand(func() float64 { return 0 }),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, apierrors.ReasonForError(e.Err), e.Delay)
		}),
	}

	obj, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired, get, claim, api.Create, api.Update, opts...)
	fmt.Printf("%s, err %v: owner %q, count %d, resourceVersion %s\n", result, err, obj.Owner, obj.Count, obj.ResourceVersion)
	fmt.Printf("requests: %d get, %d create, %d update\n", api.gets, api.creates, api.updates)

	// Again with the object it returned, as from a cache: nothing to do.
	api.gets, api.creates, api.updates = 0, 0, 0
	_, result, err = retry.CreateOrUpdate(ctx, retry.DefaultRetry, obj, get, claim, api.Create, api.Update, opts...)
	fmt.Printf("%s, err %v; requests: %d get, %d create, %d update\n", result, err, api.gets, api.creates, api.updates)
	// Output:
	// attempt 1: AlreadyExists; waiting 10ms
	// updated, err <nil>: owner "controller-a", count 5, resourceVersion 2
	// requests: 2 get, 1 create, 1 update
	// unchanged, err <nil>; requests: 0 get, 0 create, 0 update
}

func ExampleResult() {
	ctx := context.Background()
	api := newCounters()
	get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
	for _, owner := range []string{"a", "b", "b"} {
		_, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}, get,
			func(c *Counter) error { c.Owner = owner; return nil }, api.Create, api.Update)
		if err != nil {
			fmt.Println(err)
			return
		}
		switch result {
		case retry.ResultCreated, retry.ResultUpdated:
			fmt.Printf("owner %s: %s\n", owner, result) // a reconciler records an event here
		case retry.ResultUnchanged:
			fmt.Printf("owner %s: %s, nothing sent\n", owner, result)
		}
	}
	// Output:
	// owner a: created
	// owner b: updated
	// owner b: unchanged, nothing sent
}

func ExampleIsApplyConflict() {
	// A Server-Side Apply that sets a field another manager owns fails with a
	// 409 Conflict that no retry of the same apply can resolve.
	applyErr := apierrors.NewApplyConflict([]metav1.StatusCause{{
		Type:    metav1.CauseTypeFieldManagerConflict,
		Message: `conflict with "manager-a": .data.key`,
		Field:   ".data.key",
	}}, `Apply failed with 1 conflict: conflict with "manager-a": .data.key`)
	stale := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("the object has been modified"))
	fmt.Println("apply conflict:", apierrors.IsConflict(applyErr), retry.IsApplyConflict(applyErr))
	fmt.Println("stale resourceVersion:", apierrors.IsConflict(stale), retry.IsApplyConflict(stale))

	applies := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		applies++
		return applyErr // what an apply of manager B returns
	})
	fmt.Printf("RetryOnConflict sent %d apply; err is the apply conflict: %v\n", applies, err == applyErr)
	// Output:
	// apply conflict: true true
	// stale resourceVersion: true false
	// RetryOnConflict sent 1 apply; err is the apply conflict: true
}

func ExampleOnErrorValue() {
	// A typed read that the server refuses twice while it restarts.
	ctx := context.Background()
	api := newCounters("jobs")
	api.failGets = []error{
		apierrors.NewServiceUnavailable("the apiserver is shutting down"),
		&url.Error{Op: "Get", URL: "https://apiserver/counters/jobs", Err: io.EOF}, // connection dropped
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	backoff := retry.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2}

	obj, err := retry.OnErrorValue(ctx, backoff, retry.IsTransient, func(ctx context.Context) (*Counter, error) {
		return api.Get(ctx, "jobs")
	},
		retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, e.Err, e.Delay)
		}),
	)
	fmt.Printf("err: %v, got %s at resourceVersion %s after %d gets\n", err, obj.Name, obj.ResourceVersion, api.gets)
	// Output:
	// attempt 1: the apiserver is shutting down; waiting 200ms
	// attempt 2: Get "https://apiserver/counters/jobs": EOF; waiting 400ms
	// err: <nil>, got jobs at resourceVersion 1 after 3 gets
}

// responseError is what a plain net/http caller returns for a reply it
// will retry: the response, so that the loop can read its Retry-After.
type responseError struct{ resp *http.Response }

func (e *responseError) Error() string { return "server replied " + e.resp.Status }

func ExampleWithRetryAfter() {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	start := clk.Now()
	// The server asks for 2s in delay-seconds, then for a time 5s ahead as
	// an HTTP-date, then answers.
	client := &http.Client{Transport: &replies{
		reply(http.StatusTooManyRequests, "2"),
		reply(http.StatusServiceUnavailable, clk.Now().Add(2*time.Second+5*time.Second).Format(http.TimeFormat)),
		reply(http.StatusOK, ""),
	}}
	call := func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/api", nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			return 0, &responseError{resp}
		}
		return resp.StatusCode, nil
	}
	retriable := func(err error) bool {
		var re *responseError
		return errors.As(err, &re)
	}
	serverDelay := func(err error) (time.Duration, bool) {
		var re *responseError
		if !errors.As(err, &re) {
			return 0, false
		}
		return retry.ResponseRetryAfter(re.resp, clk.Now())
	}

	code, err := retry.OnErrorValue(context.Background(), retry.DefaultRetryAfterBackoff, retriable, call,
		retry.WithRetryAfter(serverDelay),
		retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("attempt %d: %v, server asks %v; waiting %v\n", e.Attempt, e.Err, e.RetryAfter, e.Delay)
		}),
	)
	fmt.Println("err:", err, "status:", code, "slept:", clk.Since(start))
	// Output:
	// attempt 1: server replied 429 Too Many Requests, server asks 2s; waiting 2s
	// attempt 2: server replied 503 Service Unavailable, server asks 5s; waiting 5s
	// err: <nil> status: 200 slept: 7s
}

func ExampleIsTransient() {
	for _, err := range []error{
		apierrors.NewTooManyRequests("slow down", 1),
		apierrors.NewInternalError(errors.New("etcd leader changed")),
		fmt.Errorf("update: %w", apierrors.NewServiceUnavailable("shutting down")),
		&url.Error{Op: "Put", URL: "https://apiserver", Err: io.ErrUnexpectedEOF},
		apierrors.NewConflict(counterResource, "jobs", errors.New("the object has been modified")),
		apierrors.NewForbidden(counterResource, "jobs", errors.New("no")),
		&url.Error{Op: "Put", URL: "https://apiserver", Err: context.Canceled},
	} {
		fmt.Printf("%-5v %v\n", retry.IsTransient(err), err)
	}
	// Output:
	// true  slow down
	// true  Internal error occurred: etcd leader changed
	// true  update: shutting down
	// true  Put "https://apiserver": unexpected EOF
	// false Operation cannot be fulfilled on counters.example.com "jobs": the object has been modified
	// false counters.example.com "jobs" is forbidden: no
	// false Put "https://apiserver": context canceled
}

func ExampleUpdateOnConflict_outage() {
	// Riding out an outage: an outer loop retries transient failures with a
	// longer backoff around an inner UpdateOnConflict. The first write meets
	// another writer's change; the second lands, but the connection drops
	// before its reply, so its outcome is unknown to the caller. The outer
	// loop's retry reads the object afresh, finds the change already there
	// and writes nothing. That is safe because mutate sets the state it
	// wants: one that incremented Count would have run again and counted
	// twice.
	ctx := context.Background()
	api := newCounters("jobs")
	api.beforeUpdate = func() {
		if api.updates == 1 {
			api.touch("jobs")
		}
	}
	api.loseReply = 2
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	report := func(loop string) retry.Option {
		return retry.WithOnRetry(func(e retry.RetryEvent) {
			fmt.Printf("%s: attempt %d: %v; waiting %v\n", loop, e.Attempt, e.Err, e.Delay)
		})
	}
	noJitter := retry.WithRand(func() float64 { return 0 })
	outage := retry.Backoff{Steps: 6, Duration: time.Second, Factor: 2, Cap: 30 * time.Second}

	obj, err := retry.OnErrorValue(ctx, outage, retry.IsTransient, func(ctx context.Context) (*Counter, error) {
		return retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil,
			func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") },
			func(c *Counter) error { c.Owner = "controller-a"; return nil },
			api.Update, retry.WithSleeper(clk), noJitter, report("conflict"))
	}, retry.WithSleeper(clk), noJitter, report("outage"))
	fmt.Printf("err: %v, owner %q, count %d; requests: %d get, %d update\n", err, obj.Owner, obj.Count, api.gets, api.updates)
	// Output:
	// conflict: attempt 1: Operation cannot be fulfilled on counters.example.com "jobs": the object has been modified; waiting 10ms
	// outage: attempt 1: Put "https://apiserver/counters/jobs": EOF; waiting 1s
	// err: <nil>, owner "controller-a", count 100; requests: 3 get, 2 update
}

func ExampleWithFullJitter() {
	// Full jitter: each wait is a uniform fraction of the backoff's step
	// (100ms, 200ms, 400ms, 800ms), so writers that failed together spread
	// over the whole wait. The fractions are fixed here to show the waits.
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	fractions := []float64{0.5, 0.1, 0.9, 0.3}
	next := func() float64 { f := fractions[0]; fractions = fractions[1:]; return f }
	backoff := retry.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2}

	attempts := 0
	err := retry.RetryOnConflict(backoff, func() error {
		if attempts++; attempts < 5 {
			return apierrors.NewConflict(counterResource, "jobs", errors.New("the object has been modified"))
		}
		return nil
	},
		retry.WithFullJitter(),
		retry.WithRand(next),
		retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) { fmt.Printf("attempt %d failed; waiting %v\n", e.Attempt, e.Delay) }),
	)
	fmt.Printf("err: %v after %d attempts, %v slept\n", err, attempts, clk.Since(start))
	// Output:
	// attempt 1 failed; waiting 50ms
	// attempt 2 failed; waiting 20ms
	// attempt 3 failed; waiting 360ms
	// attempt 4 failed; waiting 240ms
	// err: <nil> after 5 attempts, 670ms slept
}

func ExampleBudget() {
	// One Budget for every loop that talks to one apiserver. While the
	// server is down, the loops together retry at most
	// floor(MinPerSecond*Window + Ratio*(calls in the Window)) times per
	// Window: here 5 + floor(0.1*calls).
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := &retry.Budget{Ratio: 0.1, MinPerSecond: 1, Window: 5 * time.Second, Clock: clk}
	backoff := retry.Backoff{Steps: 4, Duration: 100 * time.Millisecond, Factor: 2}
	down := apierrors.NewServiceUnavailable("the apiserver is down")

	call := func(name string) {
		attempts := 0
		err := retry.OnError(backoff, retry.IsTransient, func() error { attempts++; return down },
			retry.WithBudget(budget), retry.WithSleeper(clk))
		fmt.Printf("%s: attempts %d, budget exhausted: %v\n", name, attempts, errors.Is(err, retry.ErrBudgetExhausted))
		if errors.Is(err, retry.ErrBudgetExhausted) && attempts == 1 {
			fmt.Println("  ", err)
		}
	}
	call("call 1") // 3 retries: all it may make
	call("call 2") // the last 2 retries of the Window
	call("call 3") // refused at once: return the error, let the workqueue requeue
	clk.Step(6 * time.Second)
	call("call 4") // a Window later the retries are back
	// Output:
	// call 1: attempts 4, budget exhausted: false
	// call 2: attempts 3, budget exhausted: true
	// call 3: attempts 1, budget exhausted: true
	//    retry: retry budget exhausted after 1 attempt, last error: the apiserver is down
	// call 4: attempts 4, budget exhausted: false
}

func ExampleBudget_hold() {
	// With a Hold, the budget also bounds new calls while the server
	// fails: they wait, and one probe at a time goes through.
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	budget := &retry.Budget{Ratio: 0.1, MinPerSecond: 0.1, Window: 10 * time.Second, Hold: 100 * time.Millisecond, Clock: clk}
	backoff := retry.Backoff{Steps: 3, Duration: 10 * time.Millisecond}
	down := true
	update := func(context.Context) error {
		if down {
			return apierrors.NewServiceUnavailable("the apiserver is down")
		}
		return nil
	}
	call := func(ctx context.Context, name string) {
		err := retry.OnErrorWithContext(ctx, backoff, retry.IsTransient, update,
			retry.WithBudget(budget), retry.WithSleeper(clk))
		fmt.Printf("+%v %s: %v\n", clk.Now().Sub(start), name, err)
	}

	// One retry is granted, the next refused: the hold starts.
	call(context.Background(), "call 1")
	// A loop without a context cannot wait: refused at once.
	err := retry.OnError(backoff, retry.IsTransient, func() error { return update(nil) }, retry.WithBudget(budget))
	fmt.Printf("+%v call 2: %v\n", clk.Now().Sub(start), err)
	// A call waits, here until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !clk.HasWaiters() { // until call 3 waits
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	call(ctx, "call 3")
	// At most Hold after the refusal (each probe waits from half to all
	// of its interval), a call goes as the probe; it fails.
	clk.Step(100 * time.Millisecond)
	call(context.Background(), "call 4")

	// A caller waits; the server comes back; the next probe, at most
	// 200ms after the failed one, is the waiting call, and its success
	// ends the hold.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); call(context.Background(), "call 5") }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	down = false
	clk.Step(200 * time.Millisecond)
	wg.Wait()
	call(context.Background(), "call 6")
	// Output:
	// +10ms call 1: retry: retry budget exhausted after 2 attempts, last error: the apiserver is down
	// +10ms call 2: retry: retry budget exhausted: the budget holds new calls while the server fails, and a call without a context cannot wait
	// +10ms call 3: retry: retry budget exhausted: the call waited for the budget's hold, until context canceled
	// +110ms call 4: retry: retry budget exhausted after 1 attempt, last error: the apiserver is down
	// +310ms call 5: <nil>
	// +310ms call 6: <nil>
}

func ExampleBudget_Stats() {
	// Stats counts what a budget did, for metrics: here a healthy call, a
	// call whose retry was granted, and one whose retry was refused.
	budget := &retry.Budget{MinPerSecond: 0.1, Window: 10 * time.Second}
	backoff := retry.Backoff{Steps: 2}
	down := apierrors.NewServiceUnavailable("the apiserver is down")
	clk := testingclock.NewFakeClock(time.Now())
	_ = retry.OnError(backoff, retry.IsTransient, func() error { return nil }, retry.WithBudget(budget))
	for range 2 {
		_ = retry.OnError(backoff, retry.IsTransient, func() error { return down },
			retry.WithBudget(budget), retry.WithSleeper(clk))
	}
	fmt.Printf("%+v\n", budget.Stats())
	// Output:
	// {FirstAttempts:3 Retries:1 Refused:1 Held:0 Probes:0}
}

func ExampleWithOnDone() {
	// One hook for every call's end: enough to count calls by outcome
	// without a wrapper around each call.
	outcomes := map[string]int{}
	onDone := retry.WithOnDone(func(e retry.DoneEvent) {
		outcome := "success"
		switch {
		case e.Err == nil:
		case e.Exhausted:
			outcome = "exhausted"
		case errors.Is(e.Err, retry.ErrBudgetExhausted):
			outcome = "budget"
		case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
			outcome = "context"
		default:
			outcome = "rejected"
		}
		outcomes[outcome]++
		fmt.Printf("%s: attempts %d\n", outcome, e.Attempts)
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	conflict := apierrors.NewConflict(counterResource, "jobs", errors.New("the object has been modified"))
	failing := func(errs ...error) func() error {
		return func() error { err := errs[0]; errs = errs[1:]; return err }
	}

	_ = retry.RetryOnConflict(retry.DefaultRetry, failing(conflict, nil), retry.WithSleeper(clk), onDone)
	_ = retry.RetryOnConflict(retry.DefaultRetry, failing(conflict, conflict, conflict, conflict, conflict), retry.WithSleeper(clk), onDone)
	_ = retry.RetryOnConflict(retry.DefaultRetry, failing(apierrors.NewForbidden(counterResource, "jobs", errors.New("no"))), retry.WithSleeper(clk), onDone)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error { return nil }, retry.WithSleeper(clk), onDone)
	fmt.Println(outcomes)
	// Output:
	// success: attempts 2
	// exhausted: attempts 5
	// rejected: attempts 1
	// context: attempts 0
	// map[context:1 exhausted:1 rejected:1 success:1]
}

func ExampleUpdate() {
	// cms stands for a client-go typed client, such as
	// client.CoreV1().ConfigMaps(ns): Update takes its Get and Update.
	ctx := context.Background()
	cms := newCounterClient("jobs")
	claim := func(c *Counter) error { c.Owner = "controller-a"; return nil }

	// A built object names the one to change: Update reads it first, and
	// never writes it blind over the stored one.
	obj, err := retry.Update(ctx, retry.DefaultRetry, cms, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}, claim)
	fmt.Printf("err %v, owner %q, resourceVersion %s; requests %v\n", err, obj.Owner, obj.ResourceVersion, cms.log)

	// The object it returned is a stored copy, as an informer's lister
	// holds one: the next change is written without a read.
	cms.log = nil
	obj, err = retry.Update(ctx, retry.DefaultRetry, cms, obj, func(c *Counter) error { c.Count = 3; return nil })
	fmt.Printf("err %v, count %d, resourceVersion %s; requests %v\n", err, obj.Count, obj.ResourceVersion, cms.log)
	// Output:
	// err <nil>, owner "controller-a", resourceVersion 2; requests [get update]
	// err <nil>, count 3, resourceVersion 3; requests [update]
}

func ExampleUpdateStatus() {
	// A kind with a status subresource: UpdateStatus writes the status and
	// the server keeps everything else as stored.
	ctx := context.Background()
	deps := newCounterClient("jobs")
	obj, err := retry.UpdateStatus(ctx, retry.DefaultRetry, deps, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
		func(c *Counter) error { c.Status = "Ready"; return nil })
	fmt.Printf("err %v, status %q; requests %v\n", err, obj.Status, deps.log)
	// Output:
	// err <nil>, status "Ready"; requests [get updateStatus]
}

func ExampleEnsure() {
	// The object does not exist yet, and on this HA control plane another
	// kube-apiserver's quota admission wins the race for the namespace's
	// ResourceQuota: the first create is refused with a Conflict that is
	// not the object's own. Ensure retries it.
	ctx := context.Background()
	cms := newCounterClient()
	cms.api.failCreates = []error{quotaConflict()}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []retry.Option{
		retry.WithSleeper(clk),
		retry.WithRand(func() float64 { return 0 }),
		retry.WithOnRetry(func(e retry.RetryEvent) { fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, e.Err, e.Delay) }),
	}
	desired := &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", Labels: map[string]string{"app": "jobs"}}}
	claim := func(c *Counter) error { c.Owner = "controller-a"; return nil }

	obj, result, err := retry.Ensure(ctx, retry.DefaultRetry, cms, desired, claim, opts...)
	fmt.Printf("%s, err %v: owner %q, labels %v; requests %v\n", result, err, obj.Owner, obj.Labels, cms.log)

	// Again with the object it returned, as from a cache: nothing to do,
	// nothing sent.
	cms.log = nil
	_, result, err = retry.Ensure(ctx, retry.DefaultRetry, cms, obj, claim, opts...)
	fmt.Printf("%s, err %v; requests %v\n", result, err, cms.log)
	// Output:
	// attempt 1: Operation cannot be fulfilled on resourcequotas "quota": the object has been modified; please apply your changes to the latest version and try again; waiting 10ms
	// created, err <nil>: owner "controller-a", labels map[app:jobs]; requests [get create get create]
	// unchanged, err <nil>; requests []
}

func ExamplePatch() {
	// Patch sends what mutate changed, locked to the version read: the
	// stored count, which mutate leaves alone, is not in the patch.
	ctx := context.Background()
	cms := newCounterClient("jobs")
	cms.api.objs["jobs"].Count = 7
	obj, err := retry.Patch(ctx, retry.DefaultRetry, cms, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
		func(c *Counter) error { c.Owner = "controller-a"; return nil })
	fmt.Printf("err %v, owner %q, count %d; requests %v\n", err, obj.Owner, obj.Count, cms.log)
	fmt.Printf("%s patch: %s\n", cms.patchTypes[0], cms.api.lastPatch)
	// Output:
	// err <nil>, owner "controller-a", count 7; requests [get patch]
	// application/merge-patch+json patch: {"metadata":{"resourceVersion":"1"},"owner":"controller-a"}
}

func ExamplePatchOnConflict() {
	// Another writer changes the object between the read and the patch:
	// the server refuses the patch locked to the version read, the retry
	// reads afresh and patches that version.
	ctx := context.Background()
	api := newCounters("jobs")
	api.beforePatch = func() {
		if api.patches == 1 {
			api.touch("jobs")
		}
	}
	get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
	patch := func(ctx context.Context, c *Counter, data []byte) (*Counter, error) {
		fmt.Printf("patch %s\n", data)
		return api.Patch(ctx, c.Name, data)
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj, err := retry.PatchOnConflict(ctx, retry.DefaultRetry, nil, get,
		func(c *Counter) error { c.Owner = "controller-a"; return nil }, patch, retry.WithSleeper(clk))
	fmt.Printf("err %v, owner %q, count %d (the other writer's); requests: %d get, %d patch\n", err, obj.Owner, obj.Count, api.gets, api.patches)
	// Output:
	// patch {"metadata":{"resourceVersion":"1"},"owner":"controller-a"}
	// patch {"metadata":{"resourceVersion":"2"},"owner":"controller-a"}
	// err <nil>, owner "controller-a", count 100 (the other writer's); requests: 2 get, 2 patch
}

func ExampleWithAttemptTimeout() {
	// The server never answers the first read. Its attempt ends at its own
	// deadline and is retried, although an update loop retries no error of
	// a read otherwise; the caller's ctx has no deadline at all.
	ctx := context.Background()
	cms := newCounterClient("jobs")
	cms.stall = "get"
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj, err := retry.Update(ctx, retry.DefaultRetry, cms, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
		func(c *Counter) error { c.Owner = "controller-a"; return nil },
		retry.WithAttemptTimeout(time.Millisecond), // a few seconds against a real server
		retry.WithSleeper(clk), retry.WithRand(func() float64 { return 0 }),
		retry.WithOnRetry(func(e retry.RetryEvent) { fmt.Printf("attempt %d: %v; waiting %v\n", e.Attempt, e.Err, e.Delay) }))
	fmt.Printf("err %v, owner %q; requests %v\n", err, obj.Owner, cms.log)
	// Output:
	// attempt 1: context deadline exceeded; waiting 10ms
	// err <nil>, owner "controller-a"; requests [get get update]
}

// ExampleContention shows a writer's loops learning, in one Contention,
// how long to wait on a contended object: the second call's one retry
// starts from what the first call's Conflicts taught, not from
// HotObjectBackoff's 5ms. The waits are those of a fake sleeper, the
// jitter drawn as 0.
func ExampleContention() {
	hot := retry.NewContention() // one per hot object, for the life of the process
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "hot", errors.New("modified"))
	for call, conflicts := range []int{3, 1} {
		sleeper := &fakeSleeper{}
		left := conflicts
		err := retry.RetryOnConflict(retry.HotObjectBackoff, func() error {
			if left > 0 {
				left--
				return conflict
			}
			return nil
		}, retry.WithContention(hot), retry.WithRand(func() float64 { return 0 }),
			retry.WithSleeper(sleeper))
		fmt.Printf("call %d: %v, waited %v\n", call+1, err, sleeper.waits)
	}
	// Output:
	// call 1: <nil>, waited [5ms 7.5ms 11.25ms]
	// call 2: <nil>, waited [8.4375ms]
}

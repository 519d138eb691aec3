package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
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

package bench_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
)

// Every benchmark runs the same operation for this library and for client-go
// (or apimachinery, or what client-go's rest package does), as the
// sub-benchmarks impl=kuberetry and impl=clientgo, so that
//
//	benchstat -col '/impl@(clientgo kuberetry)' bench.txt
//
// prints them side by side, with client-go as the base.
const (
	ours   = "impl=kuberetry"
	theirs = "impl=clientgo"
)

var (
	errSink  error
	durSink  time.Duration
	boolSink bool
)

// BenchmarkOnErrorSuccess is the success path: fn returns nil at once.
func BenchmarkOnErrorSuccess(b *testing.B) {
	fn := func() error { return nil }
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn)
		}
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = cgretry.OnError(cgretry.DefaultRetry, apierrors.IsConflict, fn)
		}
	})
}

// BenchmarkRetryOnConflictSuccess is the success path of RetryOnConflict.
func BenchmarkRetryOnConflictSuccess(b *testing.B) {
	fn := func() error { return nil }
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = retry.RetryOnConflict(retry.DefaultRetry, fn)
		}
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = cgretry.RetryOnConflict(cgretry.DefaultRetry, fn)
		}
	})
}

// errRetriable is pre-built, so building an error is not measured.
var errRetriable = errors.New("retriable")

// BenchmarkZeroWaitRetries is a loop that fails 5 times (1 attempt and 4
// retries) with waits of 0 and a trivial predicate: the loop's own cost.
func BenchmarkZeroWaitRetries(b *testing.B) {
	fn := func() error { return errRetriable }
	always := func(error) bool { return true }
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = retry.OnError(retry.Backoff{Steps: 5}, always, fn)
		}
		wantErr(b, errRetriable)
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = cgretry.OnError(wait.Backoff{Steps: 5}, always, fn)
		}
		wantErr(b, errRetriable)
	})
}

// BenchmarkConflictZeroWaitRetries is the same loop on a Conflict through
// RetryOnConflict, so apierrors.IsConflict runs on every attempt.
func BenchmarkConflictZeroWaitRetries(b *testing.B) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("the object has been modified"))
	fn := func() error { return conflict }
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = retry.RetryOnConflict(retry.Backoff{Steps: 5}, fn)
		}
		wantErr(b, conflict)
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			errSink = cgretry.RetryOnConflict(wait.Backoff{Steps: 5}, fn)
		}
		wantErr(b, conflict)
	})
}

func wantErr(b *testing.B, want error) {
	b.Helper()
	if errSink != want {
		b.Fatalf("got %v, want %v", errSink, want)
	}
}

// BenchmarkBackoffStep is one Backoff.Step of a 10-step backoff with
// jitter, going through all 10 steps and starting again.
func BenchmarkBackoffStep(b *testing.B) {
	base := retry.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10}
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		bo := base
		for b.Loop() {
			if bo.Steps < 1 {
				bo = base
			}
			durSink = bo.Step()
		}
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		bo := wait.Backoff(base)
		for b.Loop() {
			if bo.Steps < 1 {
				bo = wait.Backoff(base)
			}
			durSink = bo.Step()
		}
	})
}

// BenchmarkRetryAfter reads the delay a wrapped 429 suggests: RetryAfter
// against apierrors.SuggestsClientDelay, which it is built on.
func BenchmarkRetryAfter(b *testing.B) {
	err := fmt.Errorf("update: %w", apierrors.NewTooManyRequests("slow down", 5))
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			durSink, boolSink = retry.RetryAfter(err)
		}
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var secs int
			secs, boolSink = apierrors.SuggestsClientDelay(err)
			durSink = time.Duration(secs) * time.Second
		}
	})
	if durSink != 5*time.Second || !boolSink {
		b.Fatalf("got %v, %v; want 5s, true", durSink, boolSink)
	}
}

// BenchmarkParseRetryAfterSeconds parses a delay-seconds header. client-go
// exports no parser; its rest package reads the header with strconv.Atoi,
// which is what impl=clientgo runs.
func BenchmarkParseRetryAfterSeconds(b *testing.B) {
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	const header = "120"
	b.Run(ours, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			durSink, boolSink = retry.ParseRetryAfter(header, now)
		}
	})
	b.Run(theirs, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n, err := strconv.Atoi(header)
			durSink, boolSink = time.Duration(n)*time.Second, err == nil
		}
	})
	if durSink != 120*time.Second || !boolSink {
		b.Fatalf("got %v, %v; want 2m0s, true", durSink, boolSink)
	}
}

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kuberetry/retry"
)

// The benchmarks in this file wait in real time: they measure the default
// sleeper, not the loop's cost. `make bench` skips them; `make bench-wait`
// runs them with a fixed number of waits:
//
//	go test -run='^$' -bench='^Benchmark(WaitAccuracy|CancelLatency)$' -benchtime=200x .

// BenchmarkWaitAccuracy measures how much longer than asked the default
// sleeper waits, through the public API: the time from the end of the first
// call of fn to the start of the second, minus the wait the backoff asks
// for. mode=plain is OnError (time.Sleep); mode=context is
// OnErrorWithContext under a cancelable context (a timer and a select). It
// reports the median and the 99th percentile of the overshoot.
func BenchmarkWaitAccuracy(b *testing.B) {
	for _, wait := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		for _, mode := range []string{"plain", "context"} {
			b.Run(fmt.Sprintf("wait=%v/mode=%s", wait, mode), func(b *testing.B) {
				b.ReportAllocs()
				bo := retry.Backoff{Steps: 2, Duration: wait} // one wait of exactly `wait`
				always := func(error) bool { return true }
				var (
					firstEnd  time.Time
					calls     int
					overshoot []time.Duration
				)
				fn := func() error {
					start := time.Now()
					calls++
					if calls%2 == 1 {
						firstEnd = time.Now()
						return errBench
					}
					overshoot = append(overshoot, start.Sub(firstEnd)-wait)
					return nil
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ctxFn := func(context.Context) error { return fn() }
				for b.Loop() {
					var err error
					if mode == "plain" {
						err = retry.OnError(bo, always, fn)
					} else {
						err = retry.OnErrorWithContext(ctx, bo, always, ctxFn)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				reportPercentiles(b, overshoot, "overshoot")
			})
		}
	}
}

// BenchmarkCancelLatency measures how long after cancel() a loop waiting an
// hour under the default sleeper returns. The wait is given time to begin
// before the cancel.
func BenchmarkCancelLatency(b *testing.B) {
	b.Run("wait=1h", func(b *testing.B) {
		b.ReportAllocs()
		bo := retry.Backoff{Steps: 2, Duration: time.Hour}
		always := func(error) bool { return true }
		fn := func(context.Context) error { return errBench }
		var latency []time.Duration
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			var (
				wg        sync.WaitGroup
				cancelled time.Time
			)
			waitBegins := retry.WithOnRetry(func(retry.RetryEvent) {
				wg.Go(func() {
					time.Sleep(200 * time.Microsecond) // let the loop enter its wait
					cancelled = time.Now()
					cancel()
				})
			})
			err := retry.OnErrorWithContext(ctx, bo, always, fn, waitBegins)
			returned := time.Now()
			wg.Wait()
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errBench) {
				b.Fatalf("got %v, want context.Canceled wrapping the last error", err)
			}
			latency = append(latency, returned.Sub(cancelled))
		}
		reportPercentiles(b, latency, "latency")
	})
}

// reportPercentiles reports the median and the 99th percentile (nearest
// rank) of ds, in microseconds.
func reportPercentiles(b *testing.B, ds []time.Duration, what string) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := max(int(math.Ceil(p*float64(len(ds))))-1, 0)
		return float64(ds[i]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), "p50-"+what+"-µs")
	b.ReportMetric(at(0.99), "p99-"+what+"-µs")
}

package ctrlretry_test

import (
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// instant is a loop option set that sleeps on a fake clock, with the
// jitter source fixed at 0.5, and records the attempts and waits of the
// loop.
type instant struct {
	clock    *testclock.FakeClock
	waits    []time.Duration
	attempts int
}

func newInstant() *instant {
	return &instant{clock: testclock.NewFakeClock(time.Unix(0, 0))}
}

func (in *instant) option() ctrlretry.Option {
	return ctrlretry.WithLoopOptions(in.loopOptions()...)
}

func (in *instant) loopOptions() []retry.Option {
	return []retry.Option{
		retry.WithSleeper(in.clock),
		retry.WithRand(func() float64 { return 0.5 }),
		retry.WithOnRetry(func(e retry.RetryEvent) { in.waits = append(in.waits, e.Delay) }),
		retry.WithOnDone(func(e retry.DoneEvent) { in.attempts = e.Attempts }),
	}
}

package retry_test

import (
	"sync"
	"time"

	"github.com/kuberetry/retry"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeSleeper is the suite's one fake Sleeper: Sleep never sleeps. It
// records the wait in waits, appends "wait" to *log when log is set (the
// call log of a counterClient or a calls harness, where a wait shows where
// each attempt ends), and then runs hook with the wait, if set: the tests
// cancel a context there, advance a fake clock, or interleave other calls
// while a loop waits. Sleep is safe for concurrent use as far as waits
// goes; a test that shares one sleeper between goroutines leaves log
// unset, and guards what its hook touches.
type fakeSleeper struct {
	log  *[]string
	hook func(time.Duration)

	mu    sync.Mutex
	waits []time.Duration
}

func (s *fakeSleeper) Sleep(d time.Duration) {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	if s.log != nil {
		*s.log = append(*s.log, "wait")
	}
	s.mu.Unlock()
	if s.hook != nil {
		s.hook(d)
	}
}

// The tests that wait on a fake clock give it to the loop as its Sleeper.
var _ retry.Sleeper = (*testingclock.FakeClock)(nil)

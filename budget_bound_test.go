package retry_test

// The retry window's bound, checked against the tests' own log of what a
// Budget granted: over random schedules and clock steps, and with loops
// sharing a Budget on 8 goroutines.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// budgetLog is the tests' own account of what a Budget granted: the times
// of first attempts and retries, each at the latest clock reading so far,
// and the bound of the contract computed from them.
type budgetLog struct {
	ratio, min float64
	window     time.Duration
	now        time.Time   // the latest reading of the Budget's clock
	firsts     []time.Time // in order, as now never goes back
	retries    []time.Time
}

// read is a reading t of the Budget's clock.
func (l *budgetLog) read(t time.Time) {
	if t.After(l.now) {
		l.now = t
	}
}

// within counts the entries of ts whose age at l.now is below max (or at
// most max, when inclusive).
func (l *budgetLog) within(ts []time.Time, max time.Duration, inclusive bool) int {
	i := sort.Search(len(ts), func(i int) bool {
		age := l.now.Sub(ts[i])
		return age < max || inclusive && age == max
	})
	return len(ts) - i
}

// bound is floor(MinPerSecond*Window.Seconds() + Ratio*firsts).
func (l *budgetLog) bound(firsts int) int {
	return int(math.Floor(l.min*l.window.Seconds() + l.ratio*float64(firsts)))
}

// exceeded returns an error when the retries of the last Window (an entry
// at t counts over [t, t+Window)) pass the bound from the first attempts of
// the last Window.
func (l *budgetLog) exceeded() error {
	r, f := l.within(l.retries, l.window, false), l.within(l.firsts, l.window, false)
	if r > l.bound(f) {
		return fmt.Errorf("%d retries in the Window before %v, bound %d from %d first attempts", r, l.now, l.bound(f), f)
	}
	return nil
}

// refusable returns an error when the budget had to grant the retry it
// refused: even with every retry counted Window/10 late and every first
// attempt stopping Window/10 early, there was room for it. window must be
// a multiple of 10ns.
func (l *budgetLog) refusable() error {
	r := l.within(l.retries, l.window+l.window/10, false)
	f := l.within(l.firsts, l.window-l.window/10, true)
	if r+1 <= l.bound(f) {
		return fmt.Errorf("refused at %v with at most %d retries and at least %d first attempts counted, bound %d", l.now, r, f, l.bound(f))
	}
	return nil
}

// budgetSim drives loops on one Budget from one goroutine: while a loop
// waits, its Sleeper advances the fake clock by the wait and runs more of
// the schedule (clock steps, new calls, which may wait in turn), so calls
// interleave as they would across goroutines. It checks the bound at every
// granted retry, and that every refusal was allowed.
type budgetSim struct {
	t       *testing.T
	rng     *rand.Rand
	clk     *testingclock.FakeClock
	budget  *retry.Budget
	log     budgetLog
	actions int // left to run
	depth   int // calls waiting in a Sleeper
	grants  int
	refused int
	failed  bool
}

// step moves the clock: mostly forward by up to a third of a Window, but
// also not at all, back, or far forward.
func (s *budgetSim) step() {
	w := int64(s.log.window)
	switch p := s.rng.IntN(100); {
	case p < 50:
		s.clk.Step(time.Duration(s.rng.Int64N(w/3 + 1)))
	case p < 70:
		s.clk.Step(-time.Duration(s.rng.Int64N(2*w) + 1))
	case p < 85:
		s.clk.Step(time.Duration(w/10) * time.Duration(s.rng.IntN(30)+1))
	case p < 98:
		s.clk.Step(time.Duration(w) * time.Duration(s.rng.IntN(50)+1))
	default: // decades to centuries
		s.clk.SetTime(s.clk.Now().AddDate(10+s.rng.IntN(400), 0, 0))
	}
}

// call makes one loop call whose fn fails a random number of times.
func (s *budgetSim) call() {
	failures := s.rng.IntN(8)
	attempts := 0
	backoff := retry.Backoff{Steps: 1 + s.rng.IntN(10), Duration: time.Duration(s.rng.Int64N(int64(s.log.window)/4 + 1)), Factor: 1.5}
	s.depth++
	err := retry.OnError(backoff, always, func() error {
		attempts++
		if attempts == 1 { // deposited just before this call, at this time
			s.log.read(s.clk.Now())
			s.log.firsts = append(s.log.firsts, s.log.now)
		}
		if attempts > failures {
			return nil
		}
		return errDown
	}, retry.WithBudget(s.budget), retry.WithSleeper(&fakeSleeper{hook: func(d time.Duration) {
		s.clk.Step(d)
		s.run()
	}}), retry.WithOnRetry(func(e retry.RetryEvent) {
		if e.Final {
			return
		}
		// Granted at the clock's time when fn returned: nothing moved it.
		s.log.read(s.clk.Now())
		s.log.retries = append(s.log.retries, s.log.now)
		s.grants++
		if err := s.log.exceeded(); err != nil && !s.failed {
			s.failed = true
			s.t.Errorf("granted beyond the bound: %v", err)
		}
	}))
	s.depth--
	if errors.Is(err, retry.ErrBudgetExhausted) {
		s.log.read(s.clk.Now())
		s.refused++
		if err := s.log.refusable(); err != nil && !s.failed {
			s.failed = true
			s.t.Errorf("refused within the bound: %v", err)
		}
		if !errors.Is(err, errDown) && !s.failed {
			s.failed = true
			s.t.Errorf("a refusal does not wrap the last error: %v", err)
		}
	}
}

// run runs the schedule until it ends or, inside a wait, until the waiting
// loop's turn comes.
func (s *budgetSim) run() {
	for s.actions > 0 {
		s.actions--
		switch p := s.rng.IntN(100); {
		case p < 30:
			s.step()
		case p < 75 && s.depth < 6:
			s.call()
		case s.depth > 0:
			return // the waiting loop makes its next attempt
		default:
			s.call()
		}
	}
}

// TestBudgetBoundOverRandomSchedules is the property test: over random
// budgets and schedules of first attempts, failures and clock steps (back,
// and far forward too), no granted retry takes the retries of the last
// Window past the bound computed from the test's own log, and no refused
// one had room.
func TestBudgetBoundOverRandomSchedules(t *testing.T) {
	t.Parallel()
	iterations := 400
	if testing.Short() {
		iterations = 50
	}
	ratios := []float64{0, 0.1, 0.2, 0.5, 1, 3}
	mins := []float64{0, 0.2, 1, 4}
	windows := []time.Duration{10, 1000, time.Millisecond, time.Second, 5 * time.Second, 10 * time.Second, time.Hour}
	var grants, refused int
	for i := range iterations {
		rng := rand.New(rand.NewPCG(uint64(i), 14))
		clk := testingclock.NewFakeClock(t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
		log := budgetLog{ratio: ratios[rng.IntN(len(ratios))], min: mins[rng.IntN(len(mins))], window: windows[rng.IntN(len(windows))]}
		s := &budgetSim{t: t, rng: rng, clk: clk, log: log, actions: 300,
			budget: &retry.Budget{Ratio: log.ratio, MinPerSecond: log.min, Window: log.window, Clock: clk}}
		s.run()
		grants += s.grants
		refused += s.refused
		if s.failed {
			t.Logf("iteration %d: Ratio %v, MinPerSecond %v, Window %v", i, log.ratio, log.min, log.window)
			return
		}
	}
	t.Logf("%d retries granted, %d refused", grants, refused)
	// The schedules must reach the bound often, or the test proves little.
	assert.Greater(t, grants, 10*iterations)
	assert.Greater(t, refused, 5*iterations)
}

// TestBudgetConcurrentLoops: 8 goroutines share one Budget (run it with
// -race). The clock moves between rounds, back too, while no loop runs, so
// every entry of a round has the round's time. The log takes each first
// attempt before its loop deposits it and each retry after the budget
// granted it, so at every logged retry the log holds at least the first
// attempts the budget had seen and at most the retries it had granted:
// the bound checked from the log then holds whatever the interleaving.
func TestBudgetConcurrentLoops(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{Ratio: 0.2, MinPerSecond: 1, Window: window, Clock: clk}
	var (
		mu      sync.Mutex
		log     = budgetLog{ratio: b.Ratio, min: b.MinPerSecond, window: window}
		grants  int
		refused int
	)
	rng := rand.New(rand.NewPCG(8, 14))
	for round := range 60 {
		switch p := rng.IntN(10); {
		case p < 6:
			clk.Step(time.Duration(rng.Int64N(int64(window / 4))))
		case p < 8:
			clk.Step(-time.Duration(rng.Int64N(int64(2 * window))))
		default:
			clk.Step(window + time.Duration(rng.Int64N(int64(window))))
		}
		log.read(clk.Now())
		var wg sync.WaitGroup
		for g := range 8 {
			wgGo(&wg, func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for range 10 {
					failures := rng.IntN(6)
					attempts := 0
					mu.Lock()
					log.firsts = append(log.firsts, log.now)
					mu.Unlock()
					err := retry.OnError(retry.Backoff{Steps: 8}, always, func() error {
						attempts++
						if attempts > failures {
							return nil
						}
						return errDown
					}, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}), retry.WithOnRetry(func(retry.RetryEvent) {
						mu.Lock()
						defer mu.Unlock()
						log.retries = append(log.retries, log.now)
						grants++
						if err := log.exceeded(); err != nil {
							t.Errorf("round %d: %v", round, err)
						}
					}))
					if errors.Is(err, retry.ErrBudgetExhausted) {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	}
	t.Logf("%d retries granted, %d refused", grants, refused)
	assert.Greater(t, grants, 100)
	assert.Greater(t, refused, 100)
}

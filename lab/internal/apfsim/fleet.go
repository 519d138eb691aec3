package apfsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kuberetry/retry"
)

// Fleet is one run: a fleet of processes, all one user (one flow), each
// with Workers workers writing an object of their own, against one level,
// through a healthy phase, an outage and a healthy phase again.
type Fleet struct {
	Processes, Workers int
	Level              LevelConfig
	// NewBudget returns the Budget of one process, put on its wire
	// (WrapTransport); nil means no budget.
	NewBudget func() *retry.Budget
	// Warmup is how long the workers run before the healthy phase
	// counts; they start spread over the first Pace of it.
	Warmup time.Duration
	// Before is the healthy phase before the outage, Outage the outage.
	Before, Outage time.Duration
	// After is the least the healthy phase after the outage lasts; it goes
	// on until every worker is back, for at most AfterMax.
	After, AfterMax time.Duration
	// Pace is how long after a successful call a worker calls again.
	Pace time.Duration
	// RequeueMax caps the wait after a failed call (Requeue's); zero
	// leaves client-go's cap of 1000s.
	RequeueMax time.Duration
	// Bin is the width of the level's bins of counts.
	Bin time.Duration
}

// LoopBackoff is the workers' own loop around a call, as in the fleet on
// the real apiserver: 10 attempts 10ms apart on IsTransient (client-go's
// DefaultRetry with Steps 10).
var LoopBackoff = retry.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// Requeue is the wait before a failed key comes back, as client-go's
// workqueue.DefaultTypedControllerRateLimiter gives it for a key failing
// for the failures-th time in a row (from 0): 5ms doubling, at most
// 1000s. Its overall bucket (10 per second after a burst of 100) never
// binds here: a process has at most 4 keys.
func Requeue(failures int) time.Duration {
	if failures >= 18 { // 5ms << 18 is above 1000s
		return 1000 * time.Second
	}
	return min(5*time.Millisecond<<failures, 1000*time.Second)
}

// Result is what a run measured.
type Result struct {
	Fleet Fleet
	Stats *Stats
	// OutageStart and OutageEnd are offsets of the Stats' bins.
	OutageStart, OutageEnd time.Duration
	// Back is, for each worker, how long after the outage's end its first
	// call that succeeded ended; -1 for a worker not back by AfterMax.
	Back []time.Duration
	// ProbesDuring is the probes the Budgets sent during the outage
	// (counted at its start and end).
	ProbesDuring uint64
}

// Validate names each invalid field and its value.
func (f Fleet) Validate() error {
	if err := f.Level.Validate(); err != nil {
		return err
	}
	if f.Processes < 1 || f.Workers < 1 {
		return fmt.Errorf("apfsim: invalid fleet: Processes %d and Workers %d must be at least 1", f.Processes, f.Workers)
	}
	if f.Pace <= 0 || f.Bin <= 0 || f.Outage <= 0 || f.AfterMax < f.After || f.RequeueMax < 0 {
		return fmt.Errorf("apfsim: invalid fleet: Pace %v, Bin %v and Outage %v must be above 0, AfterMax %v at least After %v, RequeueMax %v not below 0",
			f.Pace, f.Bin, f.Outage, f.AfterMax, f.After, f.RequeueMax)
	}
	return nil
}

// Run runs the fleet, on the clock of the bubble it is called in, and
// returns once every goroutine it started has ended.
func (f Fleet) Run(ctx context.Context) (*Result, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	stats := NewStats(f.Bin, f.Warmup+f.Before+f.Outage+f.AfterMax+time.Second)
	level, err := NewLevel(f.Level, stats)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &Result{Fleet: f, Stats: stats, Back: make([]time.Duration, f.Processes*f.Workers)}
	var (
		mu      sync.Mutex
		end     time.Time // zero until the outage ends
		backN   int
		budgets []*retry.Budget
		wg      sync.WaitGroup
	)
	for i := range r.Back {
		r.Back[i] = -1
	}
	back := func(w int) {
		mu.Lock()
		defer mu.Unlock()
		if !end.IsZero() && r.Back[w] < 0 {
			r.Back[w] = time.Since(end)
			backN++
		}
	}
	for p := range f.Processes {
		var rt http.RoundTripper = level
		if f.NewBudget != nil {
			b := f.NewBudget()
			budgets = append(budgets, b)
			rt = b.WrapTransport(level)
		}
		c := &Client{HTTP: &http.Client{Transport: rt}, Host: "https://apiserver", User: "system:serviceaccount:fleet:agent"}
		for w := range f.Workers {
			id := p*f.Workers + w
			path := fmt.Sprintf("/api/v1/namespaces/fleet/configmaps/p%d-w%d", p, w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.work(ctx, c, path, func() { back(id) })
			}()
		}
	}
	probes := func() (n uint64) {
		for _, b := range budgets {
			n += b.Stats().Probes
		}
		return n
	}

	time.Sleep(f.Warmup + f.Before)
	r.OutageStart = time.Since(stats.start)
	p0 := probes()
	level.SetDown(true)
	time.Sleep(f.Outage)
	level.SetDown(false)
	mu.Lock()
	end = time.Now()
	mu.Unlock()
	r.OutageEnd = time.Since(stats.start)
	r.ProbesDuring = probes() - p0
	for waited := time.Duration(0); waited < f.AfterMax; waited += f.Bin {
		mu.Lock()
		done := backN == len(r.Back)
		mu.Unlock()
		if done && waited >= f.After {
			break
		}
		time.Sleep(f.Bin)
	}
	cancel()
	wg.Wait()
	return r, nil
}

// work is one worker: it starts at a random time within the first Pace,
// then calls, in its own loop: a PUT of its object from the copy its last
// call stored, a GET before it only on its first call (as the fleet on
// the real apiserver, whose workers write from what they stored, and read
// only first and after a Conflict; the level keeps no versions, so no
// Conflict comes). It calls again Pace after a success, or after
// Requeue's wait (at most RequeueMax) after a failure, until ctx ends.
// after is called after each call that succeeded.
func (f Fleet) work(ctx context.Context, c *Client, path string, after func()) {
	body := []byte(`{"kind":"ConfigMap","apiVersion":"v1"}`)
	if sleep(ctx, time.Duration(rand.Int64N(int64(f.Pace)))) != nil {
		return
	}
	failures, stored := 0, false
	for {
		err := retry.OnErrorWithContext(ctx, LoopBackoff, retry.IsTransient, func(ctx context.Context) error {
			if !stored {
				if err := c.Do(ctx, http.MethodGet, path, nil); err != nil {
					return err
				}
			}
			if err := c.Do(ctx, http.MethodPut, path, body); err != nil {
				return err
			}
			stored = true
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		wait := f.Pace
		if err == nil {
			after()
			failures = 0
		} else {
			wait = Requeue(failures)
			if f.RequeueMax > 0 {
				wait = min(wait, f.RequeueMax)
			}
			failures++
		}
		if sleep(ctx, wait) != nil {
			return
		}
	}
}

// Summary is a run's figures.
type Summary struct {
	// RequestsBefore is the requests per second of the healthy phase
	// before the outage.
	RequestsBefore float64
	// RequestsDuring is the requests that reached the level during the
	// outage (probes included), ProbesDuring the Budgets' probes among
	// them.
	RequestsDuring int64
	ProbesDuring   uint64
	// TooManyBefore is the 429s of the healthy phase before the outage,
	// TooManyAfter those in the 2s after its end, TooManyLater those from
	// its end to the run's end; MaxRetryAfter the largest Retry-After
	// answered, in seconds.
	TooManyBefore, TooManyAfter, TooManyLater int64
	MaxRetryAfter                             int64
	// BackP50, BackP99 and BackMax are the quantiles of the workers'
	// times back; NotBack counts the workers never back (left out of the
	// quantiles).
	BackP50, BackP99, BackMax time.Duration
	NotBack                   int
	// MaxQueueWait is the longest a request waited in a queue.
	MaxQueueWait time.Duration
}

// Summarize returns r's figures.
func (r *Result) Summarize() Summary {
	s := Summary{ProbesDuring: r.ProbesDuring, MaxQueueWait: r.Stats.MaxWait(), MaxRetryAfter: r.Stats.MaxRetryAfter()}
	before, _, tooMany, _ := r.Stats.Sum(r.Fleet.Warmup, r.OutageStart)
	s.TooManyBefore = tooMany
	s.RequestsBefore = float64(before) / (r.OutageStart - r.Fleet.Warmup).Seconds()
	s.RequestsDuring, _, _, _ = r.Stats.Sum(r.OutageStart, r.OutageEnd)
	_, _, s.TooManyAfter, _ = r.Stats.Sum(r.OutageEnd, r.OutageEnd+2*time.Second)
	_, _, s.TooManyLater, _ = r.Stats.Sum(r.OutageEnd, time.Duration(r.Stats.Bins())*r.Stats.Bin())
	var back []time.Duration
	for _, d := range r.Back {
		if d < 0 {
			s.NotBack++
			continue
		}
		back = append(back, d)
	}
	slices.Sort(back)
	if len(back) > 0 {
		q := func(p float64) time.Duration { return back[min(int(p*float64(len(back))), len(back)-1)] }
		s.BackP50, s.BackP99, s.BackMax = q(0.50), q(0.99), back[len(back)-1]
	}
	return s
}

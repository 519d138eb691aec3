// Package contention runs the read-modify-write workload that produces
// update conflicts: many writers incrementing one counter in one ConfigMap,
// each increment through a retry loop, the way controllers update an object
// they share. The integration tests assert on its results and the
// contention demo prints them.
package contention

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CounterKey is the ConfigMap data key that holds the counter.
const CounterKey = "count"

// Loop is a retry loop under test: it calls fn until fn succeeds, fails
// for good, or the loop gives up, and returns what the loop returns. It
// adapts any retry helper (this library's, client-go's) to one shape.
type Loop func(ctx context.Context, fn func(context.Context) error) error

// Strategy names a retry loop and the most attempts it may make per call.
type Strategy struct {
	Name string
	// Steps is the backoff's Steps: no call may attempt more often.
	Steps int
	Loop  Loop
}

// Config is one run of the workload.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// Name is the ConfigMap to create and increment; it must not exist.
	Name string
	// Writers is the number of concurrent goroutines.
	Writers int
	// Updates is the number of increments each writer makes, one retry
	// loop call each.
	Updates int
	// Progress, if set, is called after every finished call with the
	// number of calls finished so far.
	Progress func(done int)
}

// Call is the record of one retry loop call.
type Call struct {
	Attempts  int
	Conflicts int // attempts that failed with a Conflict
	Err       error
	Latency   time.Duration
}

// Result is what one run produced.
type Result struct {
	Strategy string
	Writers  int
	Calls    []Call
	// Final is the counter's value read back after all writers finished.
	Final int
	Wall  time.Duration
}

// Run creates the ConfigMap at 0, lets cfg.Writers goroutines increment it
// cfg.Updates times each through s.Loop, and reads the counter back. The
// ConfigMap is left in place; the caller deletes it (or its namespace).
//
// Each attempt re-reads the ConfigMap, adds one and updates it with the
// resourceVersion it read, so an update that raced with another writer's
// fails with 409 Conflict, which is what the retry loops retry.
func Run(ctx context.Context, s Strategy, cfg Config) (Result, error) {
	cms := cfg.Client.CoreV1().ConfigMaps(cfg.Namespace)
	_, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name},
		Data:       map[string]string{CounterKey: "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("create counter: %w", err)
	}

	increment := func(ctx context.Context, c *Call) error {
		c.Attempts++
		cm, err := cms.Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(cm.Data[CounterKey])
		if err != nil {
			return fmt.Errorf("counter %q: %w", cm.Data[CounterKey], err)
		}
		cm.Data[CounterKey] = strconv.Itoa(n + 1)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			c.Conflicts++
		}
		// Returned as is: the loops recognize a Conflict by its type.
		return err
	}

	res := Result{Strategy: s.Name, Writers: cfg.Writers, Calls: make([]Call, cfg.Writers*cfg.Updates)}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		finished int
	)
	start := time.Now()
	for w := range cfg.Writers {
		wg.Go(func() {
			for u := range cfg.Updates {
				c := &res.Calls[w*cfg.Updates+u]
				t0 := time.Now()
				c.Err = s.Loop(ctx, func(ctx context.Context) error { return increment(ctx, c) })
				c.Latency = time.Since(t0)
				if cfg.Progress != nil {
					mu.Lock()
					finished++
					cfg.Progress(finished)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.Wall = time.Since(start)

	cm, err := cms.Get(ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("read counter back: %w", err)
	}
	if res.Final, err = strconv.Atoi(cm.Data[CounterKey]); err != nil {
		return res, fmt.Errorf("counter %q: %w", cm.Data[CounterKey], err)
	}
	return res, nil
}

// Summary condenses a Result into the numbers the tests check and the demo
// prints.
type Summary struct {
	Strategy  string
	Writers   int
	Updates   int // calls made
	Succeeded int // calls that returned nil
	GaveUp    int // calls that returned an error
	// GaveUpNonConflict counts give-ups whose error is not a Conflict.
	GaveUpNonConflict int
	Conflicts         int // attempts that failed with a Conflict
	Attempts          int
	MaxAttempts       int // most attempts made by any one call
	P50, P99          time.Duration
	Wall              time.Duration
	Final             int
}

// RetriesPerUpdate is the mean number of attempts beyond the first.
func (s Summary) RetriesPerUpdate() float64 {
	if s.Updates == 0 {
		return 0
	}
	return float64(s.Attempts-s.Updates) / float64(s.Updates)
}

// Summarize computes r's Summary.
func Summarize(r Result) Summary {
	s := Summary{Strategy: r.Strategy, Writers: r.Writers, Updates: len(r.Calls), Wall: r.Wall, Final: r.Final}
	lat := make([]time.Duration, 0, len(r.Calls))
	for _, c := range r.Calls {
		s.Attempts += c.Attempts
		s.Conflicts += c.Conflicts
		s.MaxAttempts = max(s.MaxAttempts, c.Attempts)
		if c.Err == nil {
			s.Succeeded++
		} else {
			s.GaveUp++
			if !apierrors.IsConflict(c.Err) {
				s.GaveUpNonConflict++
			}
		}
		lat = append(lat, c.Latency)
	}
	slices.Sort(lat)
	s.P50 = percentile(lat, 50)
	s.P99 = percentile(lat, 99)
	return s
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// FirstNonConflict returns the first give-up error that is not a Conflict,
// or nil.
func FirstNonConflict(r Result) error {
	for _, c := range r.Calls {
		if c.Err != nil && !apierrors.IsConflict(c.Err) {
			return c.Err
		}
	}
	return nil
}

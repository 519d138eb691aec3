package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// fleet is one run of the fleet under one policy at one queue length
// limit: what it showed and what the server counted.
type fleet struct {
	queueLength int32
	run         int // 1 to --runs
	policy      policy
	// load is the machine's load average over the last minute when the
	// run began.
	load string
	// rejected counts what the fleet's priority level rejected, by
	// reason, and dispatched what it let execute (the server's metrics).
	rejected   map[string]float64
	dispatched float64
	// offered is the requests per second the fleet offers while healthy
	// (a call per worker per pace); zero, so not checked, when the healthy
	// phase is shorter than two paces (or the pace is zero): too few calls
	// fall in it to measure.
	offered float64
	fig     figures
}

// figures is what a run of the fleet shows.
type figures struct {
	// OutageRequests counts the requests sent during the outage, by
	// every process; Probes, the probes among them (the budgets' Stats).
	OutageRequests int
	Probes         uint64
	// HealthyRate is the requests per second sent in the healthy phase
	// before the outage.
	HealthyRate float64
	// TooManyBefore counts the 429s answered in the healthy phase before
	// the outage (not in the warm-up);
	// TooManyAfter, in the afterWindow after its end; TooManyLater, from
	// its end to the run's end.
	TooManyBefore, TooManyAfter, TooManyLater int
	// MaxRetryAfter is the largest Retry-After of a 429, in seconds.
	MaxRetryAfter int
	// Back is when the last worker of the fleet was back after the
	// outage's end (a call that returned nil); AllBack is false when a
	// worker never was.
	Back    time.Duration
	AllBack bool
	// Lost counts the calls that returned nil whose write is missing;
	// Problems lists every integrity problem (those included).
	Lost     int
	Problems []string
	// Seconds are the requests sent and the 429s answered in each second
	// from the healthy phase's start to the run's end.
	Seconds []second
}

// second is one second of a run, [At, At+1) seconds from the outage's
// start.
type second struct {
	At                int
	Requests, TooMany int
}

// afterWindow is how long after the outage's end its 429s are counted.
const afterWindow = 2 * time.Second

// computeFigures computes a fleet's figures from its processes' results
// (which began together and share their phases) and requests.
func computeFigures(results []*outage.Result, requests []reqcount.Request) figures {
	var f figures
	if len(results) == 0 {
		return f
	}
	first := results[0]
	healthy := first.Begin.Add(first.Bounds[outage.Before])
	start := first.Begin.Add(first.Bounds[outage.During])
	end := first.Begin.Add(first.Bounds[outage.After])
	f.AllBack = true
	for i, r := range results {
		f.OutageRequests += r.OutageRequests()
		if r.HasBudget {
			f.Probes += r.BudgetDelta(outage.During, outage.After).Probes
		}
		back, ok := r.Recovery()
		f.AllBack = f.AllBack && ok
		f.Back = max(f.Back, back)
		for _, problem := range r.Integrity() {
			if strings.Contains(problem, outage.LostWrite) {
				f.Lost++
			}
			f.Problems = append(f.Problems, fmt.Sprintf("process %d: %s", i, problem))
		}
	}

	from := -int((first.Bounds[outage.During] - first.Bounds[outage.Before] + time.Second - 1) / time.Second)
	to := int((first.Bounds[len(first.Bounds)-1] - first.Bounds[outage.During]) / time.Second)
	for at := from; at <= to; at++ {
		f.Seconds = append(f.Seconds, second{At: at})
	}
	bucket := func(t time.Time) *second {
		d := t.Sub(start)
		at := int(d / time.Second)
		if d < 0 && d%time.Second != 0 {
			at-- // floor
		}
		if at < from || at > to {
			return nil
		}
		return &f.Seconds[at-from]
	}
	healthyRequests := 0
	for _, r := range requests {
		if s := bucket(r.Start); s != nil {
			s.Requests++
		}
		if !r.Start.Before(healthy) && r.Start.Before(start) {
			healthyRequests++
		}
		if r.Code != http.StatusTooManyRequests {
			continue
		}
		if s := bucket(r.End); s != nil {
			s.TooMany++
		}
		switch {
		case r.End.Before(healthy):
		case r.End.Before(start):
			f.TooManyBefore++
		case r.End.Before(end):
		default:
			f.TooManyLater++
			if r.End.Before(end.Add(afterWindow)) {
				f.TooManyAfter++
			}
		}
		if n, err := strconv.Atoi(r.RetryAfter); err == nil {
			f.MaxRetryAfter = max(f.MaxRetryAfter, n)
		}
	}
	if d := start.Sub(healthy); d > 0 {
		f.HealthyRate = float64(healthyRequests) / d.Seconds()
	}
	return f
}

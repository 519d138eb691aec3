// Command fleet runs a fleet of controller processes through an outage on
// a kube-apiserver with API Priority and Fairness on, and checks
// NewBudget()'s targets for a fleet: few requests during the outage, few
// 429s once it ends, every worker back soon, no write lost.
//
// The fleet is 48 processes of 4 workers, all one service account (each
// process impersonates it), which a FlowSchema of the fleet's own sends to
// a priority level of its own: 10 seats, lending and borrowing none, 64
// queues, a hand of 4, and each queue's length limited to 20, then to 10
// (so at most 90, then 50, requests of the fleet's one flow in the
// level). Each process has its own budget, clientset, transport, dialer
// and TCP proxy (so a connection of its own); each worker updates a
// ConfigMap of its own through the typed clientset from the object it
// stored last (a PUT alone, a read only first and after a Conflict:
// client-go resends a read that met a reset connection 1s later, by
// itself), inside its own loop (OnErrorWithContext(IsTransient), 10
// attempts 10ms apart), a failed key back through client-go's workqueue
// rate limiter,
// the next call 500ms after a success, the fleet's first calls spread
// evenly over 500ms. After a 2s warm-up and 3s healthy, every proxy resets
// its connections and each new one for 5s, then the fleet runs until
// every worker is back (at least 5s, at most 20s).
//
// For each queue length limit and each of --runs runs, it runs the fleet
// without a budget, then with NewBudget() in every process whose probes
// wait nearly their whole interval (Budget.Rand fixed near 1: no jitter),
// then with NewBudget() in every process, each run on
// a new priority level (the server keeps a level's raised Retry-After
// until it drops again). It prints the figures, writes fleet-apiserver.csv
// to the repository's docs/ directory (or --out), and exits non-zero
// when NewBudget() misses a target in a run: requests during the outage
// at most 0.12x those without a budget, 429s in the 2s after its end at
// most max(0.25x those without, 5), every worker back within 1.5s of the
// end, no write lost; and when the fleet sent less than 0.9x the load it
// offers in the healthy phase before the outage (checked when that phase
// lasts at least two paces): the server was saturated, so the run
// measured the machine rather than the outage.
// --quick runs a small fleet, once (for the tests); --processes,
// --workers and --pace change the fleet.
//
// It starts etcd and a kube-apiserver in process, on loopback.
//
//	go run ./cmd/fleet [--out DIR] [--runs N] [--quick] [--processes N] [--workers N] [--pace D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

func main() {
	cluster.Main("fleet", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// shape is the size of the fleet and its schedule.
type shape struct {
	processes    int
	sched        outage.Schedule
	queueLengths []int32
	runs         int
}

var (
	full = shape{
		processes: 48,
		sched: outage.Schedule{
			Workers: 4, Warmup: 2 * time.Second, Before: 3 * time.Second, Outage: 5 * time.Second,
			After: 5 * time.Second, AfterMax: 20 * time.Second, Pace: 500 * time.Millisecond, Pause: 100 * time.Millisecond,
			Spread: 500 * time.Millisecond,
		},
		queueLengths: []int32{20, 10},
		runs:         3,
	}
	quick = shape{
		processes: 4,
		sched: outage.Schedule{
			Workers: 2, Warmup: time.Second, Before: time.Second, Outage: 2 * time.Second,
			After: 2 * time.Second, AfterMax: 10 * time.Second, Pace: 500 * time.Millisecond, Pause: 100 * time.Millisecond,
			Spread: 500 * time.Millisecond,
		},
		queueLengths: []int32{10},
		runs:         1,
	}
)

// policy is what each process of a fleet bounds its load with.
type policy struct {
	name string
	// slug names the policy in a priority level's name.
	slug string
	// budget returns a process's budget; nil for no budget.
	budget func() *retry.Budget
	// target: the policy must meet the targets.
	target bool
}

// policies are run in this order, in every run at every queue length.
var policies = []policy{
	{name: outage.NoBudget.Name, slug: "none"},
	{name: "NewBudget(), r fixed near 1", slug: "fixed", budget: fixedNearOne},
	{name: "NewBudget()", slug: "budget", budget: retry.NewBudget, target: true},
}

// fixedNearOne is NewBudget() whose probes wait nearly their whole
// interval, unjittered: close to the schedule before the jitter (a 429's
// Retry-After still keeps probes back).
func fixedNearOne() *retry.Budget {
	b := retry.NewBudget()
	b.Rand = func() float64 { return 0.999999 }
	return b
}

// errMissed is returned, wrapped, when a target was missed.
var errMissed = errors.New("targets missed")

func run(ctx context.Context, args []string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("fleet", flag.ContinueOnError)
	out := flags.String("out", "", "directory for fleet-apiserver.csv (default: the repository's docs/)")
	runs := flags.Int("runs", full.runs, "runs at each queue length limit")
	small := flags.Bool("quick", false, "a small fleet, once (for the tests)")
	processes := flags.Int("processes", full.processes, "processes in the fleet")
	workers := flags.Int("workers", full.sched.Workers, "workers in each process")
	pace := flags.Duration("pace", full.sched.Pace, "how long after a success a worker calls again")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	sh := full
	if *small {
		sh = quick
	}
	flags.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "runs":
			sh.runs = *runs
		case "processes":
			sh.processes = *processes
		case "workers":
			sh.sched.Workers = *workers
		case "pace":
			sh.sched.Pace = *pace
		}
	})
	switch {
	case sh.runs < 1 || sh.runs > 100:
		return fmt.Errorf("--runs %d: want 1 to 100", sh.runs)
	case sh.processes < 1 || sh.processes > 1000:
		return fmt.Errorf("--processes %d: want 1 to 1000", sh.processes)
	case sh.sched.Workers < 1 || sh.sched.Workers > 100:
		return fmt.Errorf("--workers %d: want 1 to 100", sh.sched.Workers)
	case sh.sched.Pace < 0 || sh.sched.Pace > time.Minute:
		return fmt.Errorf("--pace %v: want 0 to 1m", sh.sched.Pace)
	}
	dir := *out
	if dir == "" {
		root, err := cluster.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "docs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, time.Duration(sh.runs)*20*time.Minute)
	defer cancel()
	c, err := cluster.OpenInProcess(ctx, "fleet-", p, serverFlags...)
	if err != nil {
		return err
	}
	defer c.Close()
	lv, err := newLevel(ctx, c.Client, c.Config, c.Namespace)
	if err != nil {
		return err
	}
	env := &outage.Env{Config: lv.impersonated, Client: c.Client, Namespace: c.Namespace}

	var fleets []*fleet
	for run := 1; run <= sh.runs; run++ {
		for _, q := range sh.queueLengths {
			for _, pol := range policies {
				if err := lv.use(ctx, fmt.Sprintf("fleet-q%d-run%d-%s", q, run, pol.slug), q); err != nil {
					return err
				}
				p.Line("run %d of %d, queue length %d, %s: %d processes x %d workers", run, sh.runs, q, pol.name, sh.processes, sh.sched.Workers)
				f, err := runFleet(ctx, env, sh, pol)
				if err != nil {
					return err
				}
				f.queueLength, f.run = q, run
				if f.rejected, f.dispatched, err = lv.rejected(ctx); err != nil {
					return err
				}
				p.Line("  %s", f.summary())
				fleets = append(fleets, f)
			}
		}
	}

	fmt.Fprintf(stdout, "On %s, API Priority and Fairness on, RBAC; %d processes x %d workers, one service account, "+
		"its own priority level (%d seats, %d queues, hand %d), a %v outage, the next call %v after a success; "+
		"load: the 1-minute load average at each run's start\n\n",
		c.Where, sh.processes, sh.sched.Workers, seats, queues, handSize, sh.sched.Outage, sh.sched.Pace)
	if err := writeTable(stdout, fleets); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	writeSeconds(stdout, fleets)
	csvPath := filepath.Join(dir, "fleet-apiserver.csv")
	if err := writeCSV(csvPath, fleets); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", csvPath)
	if missed := verdicts(fleets); len(missed) > 0 {
		return fmt.Errorf("%w:\n%s", errMissed, strings.Join(missed, "\n"))
	}
	return nil
}

// runFleet runs sh.processes processes under pol at once, each a run of
// env's of its own, and records every request each sends, below its
// budget.
func runFleet(ctx context.Context, env *outage.Env, sh shape, pol policy) (*fleet, error) {
	f := &fleet{policy: pol, load: loadAverage()}
	if sh.sched.Pace > 0 && sh.sched.Before >= 2*sh.sched.Pace {
		f.offered = float64(sh.processes*sh.sched.Workers) / sh.sched.Pace.Seconds()
	}
	var wires []*reqcount.Counter
	p := outage.Policy{Name: pol.name, New: func() *outage.Instance {
		wire := &reqcount.Counter{KeepRequests: true}
		wires = append(wires, wire)
		if pol.budget == nil {
			return &outage.Instance{Wrap: wire.Wrap}
		}
		b := pol.budget()
		return &outage.Instance{
			Wrap:   func(rt http.RoundTripper) http.RoundTripper { return b.WrapTransport(wire.Wrap(rt)) },
			Budget: b,
		}
	}}
	runs := make([]outage.Run, sh.processes)
	for i := range runs {
		runs[i] = outage.Run{Caller: outage.LoopQueue, Policy: p, Stored: true}
	}
	rs, err := env.Run(ctx, sh.sched, runs)
	if err != nil {
		return nil, err
	}
	var requests []reqcount.Request
	for _, w := range wires {
		requests = append(requests, w.Requests()...)
	}
	f.fig = computeFigures(rs, requests)
	return f, nil
}

// loadAverage returns the machine's load average over the last minute,
// or "?" where /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if fields := strings.Fields(string(b)); len(fields) > 0 {
		return fields[0]
	}
	return "?"
}

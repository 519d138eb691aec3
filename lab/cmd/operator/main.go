// Command operator runs a controller-runtime manager as an operator runs
// it, through outages, and prints what its logs and metrics showed: the
// figures docs/budget.md, docs/controller-runtime.md and docs/metrics.md
// quote.
//
// The manager runs in a process of its own (this program, run again) with
// the README's recommended setup (NewBudget, LogHolds, BudgetMetrics,
// cfg.Wrap(budget.WrapTransport)) or without the budget's lines; leader
// election on (a Lease in its namespace, client-go's defaults:
// LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s);
// controller-runtime's default logger, zap.New() (JSON on standard
// error; client-go's leader election logs through it, and any klog line
// is read from there too); its metrics served over
// HTTP and scraped every 250ms by this command. Its one controller copies
// each labelled ConfigMap's data into a ConfigMap of its own with
// ctrlretry.CreateOrUpdate and returns ctrlretry.Result. A counter below
// the budget counts the requests on the wire.
//
// The manager reaches an in-process kube-apiserver through a TCP proxy;
// an outage resets every connection and each new one at once. Each run
// is a load (idle: nothing to reconcile; busy: 8 objects, each
// reconciled again 1s after each reconcile that succeeded, each reconcile
// a write), a policy (no
// budget, NewBudget()) and an outage shorter or longer than the
// RenewDeadline (8s, 13s). After the outage this command creates one
// more object and times its copy. Each run prints its log lines during
// the outage, its requests on the wire during it, whether it kept its
// leadership or exited, its reconcile errors and requeues, the counters
// that moved, when it recovered, and the hold's lines as zap wrote them.
//
// It exits non-zero when a busy manager with NewBudget() sent as many
// requests during an outage as one without, logged no hold, left a hold
// unended while it ran, or when a manager lost its leadership through an
// outage shorter than the RenewDeadline less a RetryPeriod. --quick runs
// three short runs with shorter leader election timings (for the tests).
//
//	go run ./cmd/operator [--quick]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kuberetry/retry/lab/internal/cluster"
)

func main() {
	exitIfManager()
	cluster.Main("operator", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// shape is the size of a run and the runs.
type shape struct {
	leader                leaderTiming
	objects               int           // a busy manager's
	period                time.Duration // each object changed once per period
	warmup, after, scrape time.Duration
	specs                 []spec
}

var (
	defaultLeader = leaderTiming{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
	full          = shape{
		leader: defaultLeader, objects: 8, period: time.Second,
		warmup: 4 * time.Second, after: 12 * time.Second, scrape: 250 * time.Millisecond,
		specs: allSpecs([]bool{false, true}, 8*time.Second, 13*time.Second),
	}
	quick = shape{
		leader: leaderTiming{lease: 6 * time.Second, renew: 4 * time.Second, retry: time.Second}, objects: 4, period: time.Second,
		warmup: 2 * time.Second, after: 3 * time.Second, scrape: 250 * time.Millisecond,
		specs: []spec{
			{busy: true, budget: false, outage: 2 * time.Second},
			{busy: true, budget: true, outage: 2 * time.Second},
			{busy: false, budget: true, outage: 6 * time.Second},
		},
	}
)

// allSpecs returns each outage with each load and each policy, the
// policies of one load and outage one after the other.
func allSpecs(loads []bool, outages ...time.Duration) []spec {
	var specs []spec
	for _, o := range outages {
		for _, busy := range loads {
			for _, budget := range []bool{false, true} {
				specs = append(specs, spec{busy: busy, budget: budget, outage: o})
			}
		}
	}
	return specs
}

func run(ctx context.Context, args []string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("operator", flag.ContinueOnError)
	small := flags.Bool("quick", false, "three short runs with shorter leader election timings (for the tests)")
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
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kuberetry-operator-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	c, err := cluster.Open(ctx, "", 0, "operator-", p)
	if err != nil {
		return err
	}
	defer c.Close()
	r := &runner{c: c, sh: sh, self: self, dir: dir, p: p}

	fmt.Fprintf(stdout, "On %s; a controller-runtime manager in a process of its own, leader election on (%v), "+
		"zap JSON logs, /metrics scraped every %v; a busy manager has %d objects, each reconciled again %v after a success (a write each time); "+
		"an outage resets every connection at a proxy in front of the server\n",
		c.Where, sh.leader, sh.scrape, sh.objects, sh.period)
	var outcomes []*outcome
	for _, s := range sh.specs {
		p.Line("run: %v", s)
		o, err := r.run(ctx, s)
		if err != nil {
			return err
		}
		o.print(stdout)
		outcomes = append(outcomes, o)
	}
	summary(stdout, outcomes)
	if missed := verdicts(outcomes, sh.leader); len(missed) > 0 {
		return errors.New(strings.Join(missed, "\n"))
	}
	return nil
}

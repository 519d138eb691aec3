// Command outages runs the outage workload side by side with the
// peers, and draws it.
//
// First a partial-failure round: one API group down (an aggregated API
// whose Service has no endpoints, so the aggregator answers 503 for it)
// while the rest of the server is healthy; every policy at once (no
// budget; gRPC's retry throttling, A6; failsafe-go's budget; failsafe-go's
// adaptive throttler; NewBudget()), each a controller of its own whose 15
// healthy workers update ConfigMaps of their own while 4 failing workers
// call the group that is down. For each it prints the healthy goodput and
// p99 and the requests the failing group was sent, and writes them to
// outages-partial.csv.
//
// Then the full outage, at seven lengths a third of a second apart from
// 4s to 6s (so that recovery is not read off one phase of client-go's 1s
// resends or of the probes' 0.5s interval), for each
// caller (the workers' own loop with the rate limiter, the same loop with
// a 100ms pause, a plain Update with a 100ms pause): one round runs every
// policy at the same time (the partial round's and NewBudget() with Hold
// 0, the third revision's budget), each with its own 16 workers,
// ConfigMaps, client and proxy, so their outages coincide. For each it
// prints the requests during the outage, when every worker was back, and
// the goodput in the 5s after the outage against the 3s before, and
// writes them to outages.csv and outages.png.
//
// The files go to the repository's docs/ directory, or --out. It exits
// non-zero when NewBudget() misses a target: in the partial round, the
// healthy calls at least 0.9x those without a budget, their p99 at most
// max(2x, +50ms) the p99 without a budget, none failed, and the failing
// group sent at most 0.25x the requests; in the full outage, at every
// length and for every caller, the fewest requests during the outage of
// every policy and every worker back within 0.75s of its end.
//
// With --budget (repeatable), it runs candidate budgets instead of the
// peers, beside no budget and NewBudget(), to choose NewBudget()'s
// defaults from: it prints the tables and writes files only to --out.
//
// It starts etcd and a kube-apiserver in process, on loopback.
//
//	go run ./cmd/outages [--out DIR] [--budget RATIO,MINPERSECOND,WINDOW,HOLD ...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/lab/internal/cluster"
	"github.com/kuberetry/retry/lab/internal/partial"
	"github.com/kuberetry/retry/lab/internal/peers"
)

func main() {
	cluster.Main("outages", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// lengths are the full outage's lengths: 4s to 6s, a third of a second
// apart.
var lengths = []time.Duration{
	4000 * time.Millisecond, 4333 * time.Millisecond, 4667 * time.Millisecond, 5000 * time.Millisecond,
	5333 * time.Millisecond, 5667 * time.Millisecond, 6000 * time.Millisecond,
}

// backWithin is how soon after the outage's end NewBudget() must have
// every worker back: its last probe's interval (0.5s) and a round trip.
const backWithin = 750 * time.Millisecond

func run(ctx context.Context, args []string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("outages", flag.ContinueOnError)
	out := flags.String("out", "", "directory for outages.csv, outages.png and outages-partial.csv (default: the repository's docs/)")
	var candidates []outage.Policy
	flags.Func("budget", "a candidate budget RATIO,MINPERSECOND,WINDOW,HOLD (e.g. 0.1,1,3s,25ms) to run instead of the peers; repeatable", func(v string) error {
		p, err := parseBudget(v)
		candidates = append(candidates, p)
		return err
	})
	if err := flags.Parse(args); err != nil {
		return err
	}
	policies := peers.All()
	partialPolicies := []outage.Policy{outage.NoBudget, peers.GRPC(), peers.FailsafeBudget(), peers.FailsafeThrottler(), outage.Ours}
	if len(candidates) > 0 {
		policies = append([]outage.Policy{outage.NoBudget, outage.Ours}, candidates...)
		partialPolicies = policies
	}
	dir := *out
	if dir == "" && len(candidates) == 0 {
		root, err := cluster.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "docs")
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	c, err := cluster.Open(ctx, "", 0, "outages-", p)
	if err != nil {
		return err
	}
	defer c.Close()

	prs, err := partialRound(ctx, c, partialPolicies, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "One API group down (an aggregated API with no endpoints: 503), the rest healthy; per policy a controller of "+
		"%d healthy workers (an Update of its own ConfigMap, the next %v after the last) and %d failing ones (a list in the group, "+
		"the next %v after an error), over %v; on %s\n\n",
		partial.Workload.Healthy, partial.Workload.Pace, partial.Workload.Failing, partial.Workload.Pause, partial.Workload.Length, c.Where)
	if err := writePartialTable(stdout, prs); err != nil {
		return err
	}

	env := &outage.Env{Config: c.Config, Client: c.Client, Namespace: c.Namespace}
	var rs []*outage.Result
	for _, length := range lengths {
		sched := outage.Workload
		sched.Outage = length
		for _, caller := range outage.Callers {
			p.Line("outage of %v, caller %s: %d policies side by side, %d workers each", length, caller, len(policies), sched.Workers)
			runs := make([]outage.Run, len(policies))
			for i, pol := range policies {
				runs[i] = outage.Run{Caller: caller, Policy: pol}
			}
			round, err := env.Run(ctx, sched, runs)
			if err != nil {
				return err
			}
			rs = append(rs, round...)
		}
	}

	sched := outage.Workload
	fmt.Fprintf(stdout, "\n%d workers of one controller, each a ConfigMap of its own with Update through a typed clientset; "+
		"%v healthy, an outage of %s with every connection reset, then healthy; on %s\n\n", sched.Workers, sched.Before, lengthList(), c.Where)
	if err := outage.WriteTable(stdout, rs); err != nil {
		return err
	}
	if dir != "" {
		csvPath, pngPath := filepath.Join(dir, "outages.csv"), filepath.Join(dir, "outages.png")
		partialPath := filepath.Join(dir, "outages-partial.csv")
		if err := writeCSV(csvPath, rs); err != nil {
			return err
		}
		if err := drawPlot(pngPath, policies, rs); err != nil {
			return err
		}
		if err := writePartialCSV(partialPath, prs); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s, %s and %s\n", csvPath, pngPath, partialPath)
	}
	var problems []string
	for _, r := range rs {
		for _, problem := range r.Integrity() {
			problems = append(problems, fmt.Sprintf("%v, %s, %s: %s", r.Sched.Outage, r.Caller, r.Policy, problem))
		}
	}
	missed := append(partialVerdicts(stdout, prs), verdicts(stdout, rs)...)
	if len(candidates) == 0 {
		problems = append(problems, missed...)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// lengthList names the outage's lengths.
func lengthList() string {
	names := make([]string, len(lengths))
	for i, l := range lengths {
		names[i] = l.String()
	}
	return strings.Join(names, ", ")
}

// partialRound takes an API group down, runs the partial-failure round
// for policies, and restores the group.
func partialRound(ctx context.Context, c *cluster.Cluster, policies []outage.Policy, p *cluster.Progress) ([]*partial.Result, error) {
	env := &partial.Env{Config: c.Config, Client: c.Client, Namespace: c.Namespace}
	p.Line("partial failure: taking %s/%s down (an aggregated API with no endpoints)", partial.Group, partial.Version)
	restore, err := env.TakeDown(ctx)
	if err != nil {
		return nil, err
	}
	p.Line("partial failure: %d policies side by side", len(policies))
	prs, err := env.Run(ctx, partial.Workload, policies)
	return prs, errors.Join(err, restore(ctx))
}

// verdicts prints, per outage length and caller, whether NewBudget()
// sent the fewest requests during the outage and had every worker back
// within backWithin of its end (beside the best of the others), and
// returns what it missed.
func verdicts(w io.Writer, rs []*outage.Result) []string {
	var missed []string
	fmt.Fprintln(w)
	for _, length := range lengths {
		for _, caller := range outage.Callers {
			var ours *outage.Result
			fewest, best := -1, time.Duration(-1)
			fewestName, bestName := "", ""
			for _, r := range rs {
				if r.Caller != caller || r.Sched.Outage != length {
					continue
				}
				if r.Policy == outage.Ours.Name {
					ours = r
					continue
				}
				if n := r.OutageRequests(); fewest < 0 || n < fewest {
					fewest, fewestName = n, r.Policy
				}
				if d, ok := r.Recovery(); ok && (best < 0 || d < best) {
					best, bestName = d, r.Policy
				}
			}
			if ours == nil {
				continue
			}
			d, back := ours.Recovery()
			fewestOK := ours.OutageRequests() <= fewest
			backOK := back && d <= backWithin
			label := fmt.Sprintf("%v outage, %s", length, caller)
			fmt.Fprintf(w, "%s: NewBudget() %d requests during the outage, fewest of the others %d (%s): %s; back %s, within %v: %s (best of the others %v, %s)\n",
				label, ours.OutageRequests(), fewest, fewestName, okWord(fewestOK), ours.Recovered(), backWithin, okWord(backOK), best.Round(10*time.Millisecond), bestName)
			if !fewestOK {
				missed = append(missed, fmt.Sprintf("%s: NewBudget() sent %d requests during the outage, %s %d", label, ours.OutageRequests(), fewestName, fewest))
			}
			if !backOK {
				missed = append(missed, fmt.Sprintf("%s: NewBudget() back %s after the outage, want within %v", label, ours.Recovered(), backWithin))
			}
		}
	}
	return missed
}

// parseBudget parses RATIO,MINPERSECOND,WINDOW,HOLD into a policy of a
// Budget with those fields on the wire.
func parseBudget(v string) (outage.Policy, error) {
	f := strings.Split(v, ",")
	if len(f) != 4 {
		return outage.Policy{}, fmt.Errorf("budget %q: want RATIO,MINPERSECOND,WINDOW,HOLD", v)
	}
	ratio, err1 := strconv.ParseFloat(f[0], 64)
	minPer, err2 := strconv.ParseFloat(f[1], 64)
	window, err3 := time.ParseDuration(f[2])
	hold, err4 := time.ParseDuration(f[3])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return outage.Policy{}, fmt.Errorf("budget %q: %w", v, err)
	}
	b := retry.Budget{Ratio: ratio, MinPerSecond: minPer, Window: window, Hold: hold}
	if err := b.Validate(); err != nil {
		return outage.Policy{}, fmt.Errorf("budget %q: %w", v, err)
	}
	return outage.BudgetPolicy(fmt.Sprintf("Ratio %v, MinPerSecond %v, Window %v, Hold %v", ratio, minPer, window, hold),
		func() *retry.Budget {
			return &retry.Budget{Ratio: ratio, MinPerSecond: minPer, Window: window, Hold: hold}
		}), nil
}

func okWord(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// Command outages runs the outage workload side by side with the
// peers, and draws it.
//
// For each caller (the workers' own loop with the rate limiter, the same
// loop with a 100ms pause, a plain Update with a 100ms pause), one round
// runs every policy at the same time, each with its own 16 workers,
// ConfigMaps, client and proxy, so their outages coincide: no budget;
// NewBudget() with Hold 0 (the third revision's budget, no hold); gRPC's
// retry throttling (A6, maxTokens 10, tokenRatio 0.1); failsafe-go's
// budget; failsafe-go's adaptive throttler; and NewBudget(). For each it
// prints the requests during the 5s outage, when every worker was back,
// and the goodput in the 5s after the outage against the 3s before, and
// writes them to outages.csv and outages.png in the repository's docs/
// directory (or --out). It exits non-zero when NewBudget() does not send
// the fewest requests during the outage or is not back within 0.5s of
// the best of the others, for some caller.
//
// With --budget (repeatable), it runs candidate budgets instead of the
// peers, beside no budget and NewBudget(), to choose NewBudget()'s
// defaults from: it prints the table and writes files only to --out.
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
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/lab/internal/cluster"
	"github.com/kuberetry/retry/lab/internal/peers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, cluster.NewProgress(os.Stderr)); err != nil {
		fmt.Fprintln(os.Stderr, "outages:", err)
		stop()
		os.Exit(1)
	}
}

// backSlack is how much later than the best of the others NewBudget()
// may have every worker back.
const backSlack = 500 * time.Millisecond

func run(ctx context.Context, args []string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("outages", flag.ContinueOnError)
	out := flags.String("out", "", "directory for outages.csv and outages.png (default: the repository's docs/)")
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
	if len(candidates) > 0 {
		policies = append([]outage.Policy{outage.NoBudget, outage.Ours}, candidates...)
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	c, err := cluster.Open(ctx, "", 0, "outages-", p)
	if err != nil {
		return err
	}
	defer c.Close()
	env := &outage.Env{Config: c.Config, Client: c.Client, Namespace: c.Namespace}
	sched := outage.Workload

	var rs []*outage.Result
	for _, caller := range outage.Callers {
		p.Line("caller %s: %d policies side by side, %d workers each", caller, len(policies), sched.Workers)
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

	title := fmt.Sprintf("%d workers of one controller, each a ConfigMap of its own with Update through a typed clientset; "+
		"%v healthy, %v with every connection reset, then healthy; on %s", sched.Workers, sched.Before, sched.Outage, c.Where)
	fmt.Fprintln(stdout, title)
	fmt.Fprintln(stdout)
	if err := outage.WriteTable(stdout, rs); err != nil {
		return err
	}
	if dir != "" {
		csvPath, pngPath := filepath.Join(dir, "outages.csv"), filepath.Join(dir, "outages.png")
		if err := writeCSV(csvPath, rs); err != nil {
			return err
		}
		if err := drawPlot(pngPath, policies, rs); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s and %s\n", csvPath, pngPath)
	}
	var problems []string
	for _, r := range rs {
		for _, problem := range r.Integrity() {
			problems = append(problems, fmt.Sprintf("%s, %s: %s", r.Caller, r.Policy, problem))
		}
	}
	missed := verdicts(stdout, rs)
	if len(candidates) == 0 {
		problems = append(problems, missed...)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// verdicts prints, per caller, whether NewBudget() sent the fewest
// requests during the outage and was back within backSlack of the best
// of the others, and returns what it missed.
func verdicts(w io.Writer, rs []*outage.Result) []string {
	var missed []string
	fmt.Fprintln(w)
	for _, caller := range outage.Callers {
		var ours *outage.Result
		fewest, best := -1, time.Duration(-1)
		fewestName, bestName := "", ""
		for _, r := range rs {
			if r.Caller != caller {
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
		backOK := back && (best < 0 || d <= best+backSlack)
		fmt.Fprintf(w, "%s: NewBudget() %d requests during the outage, fewest of the others %d (%s): %s; back %s, best of the others %v (%s): %s\n",
			caller, ours.OutageRequests(), fewest, fewestName, okWord(fewestOK), ours.Recovered(), best.Round(10*time.Millisecond), bestName, okWord(backOK))
		if !fewestOK {
			missed = append(missed, fmt.Sprintf("%s: NewBudget() sent %d requests during the outage, %s %d", caller, ours.OutageRequests(), fewestName, fewest))
		}
		if !backOK {
			missed = append(missed, fmt.Sprintf("%s: NewBudget() back %s, more than %v after %s (%v)", caller, ours.Recovered(), backSlack, bestName, best))
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

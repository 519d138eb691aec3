// Command study measures what retry strategies do to one hot object on a
// real kube-apiserver, and draws it.
//
// Writers in {1, 2, 4, ..., 128} increment one ConfigMap counter 10 times
// each, every increment a read-modify-write through a retry loop (the
// workload of the contention demo, integration/testenv/contention), for each of a
// set of strategies: client-go's DefaultRetry and DefaultBackoff, the same
// DefaultBackoff with Steps raised to the fewest that get 99% of the
// updates through at 64 writers (found first, by a search whose
// repetitions of the Steps found are also that strategy's point at 64
// writers), the README's earlier recommendation, three exponential
// backoffs that differ only in jitter (none, Jitter 1.0, full jitter), the
// last one also through UpdateOnConflict, and the HotObjectBackoff that the
// study chose. Each point is repeated, the repetitions interleaved (all
// points once, then again), the order of the strategies rotating, so that
// noise on the machine falls on every strategy alike.
//
// It exits non-zero when HotObjectBackoff misses its targets against the
// README's x1.2 exponential (hotTargets: requests per success and p99 at
// 16 and 64 writers), or a run breaks the workload's promises.
//
// It writes every run to study.csv and draws study-success.png,
// study-requests.png and study-p99.png (the median of the repetitions,
// with bars from the smallest to the largest) into the repository's docs/
// directory, or into --out. --quick makes a small run for tests.
//
// By default it starts a kube-apiserver and etcd in process, on loopback.
// With --apiservers N (1 to 5) it starts an HA control plane in process
// instead: N kube-apiservers on a three-member etcd behind a round-robin
// load balancer, each writer a connection of its own; its files then go to
// docs/ha-N. With --kubeconfig, or KUBECONFIG set, it uses that cluster
// instead, in a namespace it creates and deletes.
//
//	go run ./cmd/study [--quick] [--out DIR] [--reps 3] [--apiservers N | --kubeconfig FILE]
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
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

func main() {
	cluster.Main("study", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv("KUBECONFIG"), os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// plan is the size of a study.
type plan struct {
	writers []int // writer counts of the sweep
	updates int   // increments per writer
	reps    int   // repetitions of each point
	// searchWriters is the writer count at which the search raises
	// client-go DefaultBackoff's Steps until the median repetition
	// gets target of the updates through, trying at most maxSteps.
	searchWriters int
	target        float64
	maxSteps      int
}

var (
	full = plan{
		writers: []int{1, 2, 4, 8, 16, 32, 64, 128}, updates: 10, reps: 3,
		searchWriters: 64, target: 0.99, maxSteps: 9,
	}
	// quick exercises every step of a full study in seconds.
	quick = plan{
		writers: []int{1, 2, 4}, updates: 2, reps: 2,
		searchWriters: 4, target: 0.99, maxSteps: 6,
	}
)

// record is one run of the workload.
type record struct {
	Phase      string // "search" or "sweep"
	Repetition int    // 1-based
	Steps      int    // the strategy's Steps
	contention.Summary
	UpdatesPerWriter int
}

// run is the program: args are its command-line arguments, kubeconfigEnv
// the KUBECONFIG variable; the summary goes to stdout and progress to p.
func run(ctx context.Context, args []string, kubeconfigEnv string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("study", flag.ContinueOnError)
	where := cluster.AddClusterFlags(flags, kubeconfigEnv)
	out := flags.String("out", "", "directory for study.csv and the plots (default: the repository's docs/, docs/ha-N with --apiservers N)")
	quickFlag := flags.Bool("quick", false, "a small run (3 writer counts, 2 updates per writer, 2 repetitions) to check that everything works")
	reps := flags.Int("reps", 0, "repetitions of each point (default 3, 2 with --quick)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if err := where.Check(); err != nil {
		return err
	}
	pl := full
	if *quickFlag {
		pl = quick
	}
	if *reps < 0 {
		return errors.New("--reps must be positive")
	}
	if *reps > 0 {
		pl.reps = *reps
	}
	dir := *out
	if dir == "" {
		root, err := cluster.RepoRoot()
		if err != nil {
			return fmt.Errorf("%w (give --out)", err)
		}
		dir = filepath.Join(root, "docs")
		if n := where.APIServers(); n > 0 {
			// Beside the one-apiserver study, not over it.
			dir = filepath.Join(dir, fmt.Sprintf("ha-%d", n))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	cl, err := where.Open(ctx, "kuberetry-study-", p)
	if err != nil {
		return err
	}
	defer cl.Close()

	st := &study{ctx: ctx, cl: cl, p: p, plan: pl}
	start := time.Now()
	steps, reached, err := st.search()
	if err != nil {
		return err
	}
	if err := st.sweep(strategies(steps)); err != nil {
		return err
	}
	p.Line("study done in %v", time.Since(start).Round(time.Second))

	csvPath := filepath.Join(dir, "study.csv")
	if err := writeCSV(csvPath, st.records); err != nil {
		return err
	}
	names := make([]string, 0, len(strategies(steps)))
	for _, s := range strategies(steps) {
		names = append(names, s.Name)
	}
	title := fmt.Sprintf("%d updates per writer of one ConfigMap, median of %d repetitions, bars min to max", pl.updates, pl.reps)
	pngs, err := drawPlots(dir, names, nameHotObject, sweepRecords(st.records), title)
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "%d increments per writer of one ConfigMap counter, on %s; median of %d repetitions (min-max):\n\n", pl.updates, cl.Where, pl.reps)
	if reached {
		fmt.Fprintf(stdout, "client-go DefaultBackoff needs Steps %d to get %.0f%% of the updates through at %d writers (median repetition).\n\n",
			steps, 100*pl.target, pl.searchWriters)
	} else {
		fmt.Fprintf(stdout, "client-go DefaultBackoff does not get %.0f%% of the updates through at %d writers with up to %d Steps; plotted with %d.\n\n",
			100*pl.target, pl.searchWriters, pl.maxSteps, steps)
	}
	printTable(stdout, names, sweepRecords(st.records))
	fmt.Fprintf(stdout, "\nwrote %s\n\n", strings.Join(append([]string{csvPath}, pngs...), ", "))
	st.problems = append(st.problems, checkTargets(stdout, sweepRecords(st.records))...)
	if len(st.problems) > 0 {
		return fmt.Errorf("unexpected results or targets missed:\n  %s", strings.Join(st.problems, "\n  "))
	}
	return nil
}

// study runs the workload and keeps its records.
type study struct {
	ctx      context.Context
	cl       *cluster.Cluster
	p        *cluster.Progress
	plan     plan
	records  []record
	problems []string
	runs     int // runs made, for unique ConfigMap names
	// done maps a strategy to the writer count at which the search has
	// already run the sweep's point.
	done map[string]int
}

// search returns the fewest Steps, from client-go DefaultBackoff's own
// up to plan.maxSteps, with which DefaultBackoff gets plan.target of the
// updates through at plan.searchWriters writers in the median repetition,
// and whether any did (if none did, it returns maxSteps). A Steps that a
// majority of repetitions fails is given up without the rest. The
// repetitions of the Steps found are the sweep's point for that strategy
// at plan.searchWriters (phase "sweep"; the others are "search"): run
// again, they would cost minutes of a 20-minute budget, since a call at
// its last attempt waits 31s.
func (st *study) search() (steps int, reached bool, err error) {
	for steps = cgretry.DefaultBackoff.Steps; steps <= st.plan.maxSteps; steps++ {
		s := raised(steps)
		first := len(st.records)
		var rates []float64
		failed := 0
		for rep := 1; rep <= st.plan.reps && failed <= st.plan.reps/2; rep++ {
			label := fmt.Sprintf("search: %s, %d writers, repetition %d", s.Name, st.plan.searchWriters, rep)
			r, err := st.runOne(label, "search", rep, s, st.plan.searchWriters)
			if err != nil {
				return 0, false, err
			}
			rates = append(rates, r.SuccessRate())
			if r.SuccessRate() < st.plan.target {
				failed++
			}
		}
		if len(rates) == st.plan.reps && contention.Median(rates) >= st.plan.target {
			for i := first; i < len(st.records); i++ {
				st.records[i].Phase = "sweep"
			}
			st.done = map[string]int{s.Name: st.plan.searchWriters}
			return steps, true, nil
		}
	}
	return st.plan.maxSteps, false, nil
}

// sweep runs every strategy at every writer count plan.reps times,
// repetition by repetition, and in each the strategies in an order that
// rotates, so that no strategy always runs first or after the same one.
func (st *study) sweep(ss []contention.Strategy) error {
	total := st.plan.reps * (len(st.plan.writers)*len(ss) - len(st.done))
	n := 0
	for rep := 1; rep <= st.plan.reps; rep++ {
		for wi, writers := range st.plan.writers {
			for i := range ss {
				s := ss[(i+rep+wi)%len(ss)]
				if w, ok := st.done[s.Name]; ok && w == writers {
					continue
				}
				n++
				label := fmt.Sprintf("[%d/%d] %s, %d writers, repetition %d", n, total, s.Name, writers, rep)
				if _, err := st.runOne(label, "sweep", rep, s, writers); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runOne runs s with writers writers, records it and checks it.
func (st *study) runOne(label, phase string, rep int, s contention.Strategy, writers int) (contention.Summary, error) {
	if err := st.ctx.Err(); err != nil {
		return contention.Summary{}, err
	}
	name := fmt.Sprintf("counter-%d", st.runs)
	st.runs++
	n := writers * st.plan.updates
	res, err := contention.Run(st.ctx, s, contention.Config{
		Client:    st.cl.Client,
		Writer:    st.cl.Writer,
		Namespace: st.cl.Namespace,
		Name:      name,
		Writers:   writers,
		Updates:   st.plan.updates,
		Progress:  func(done int) { st.p.Live("%s: %d/%d updates", label, done, n) },
		Requests:  st.cl.Requests,
	})
	if err != nil {
		return contention.Summary{}, fmt.Errorf("%s: %w", label, err)
	}
	sum := contention.Summarize(res)
	st.p.Line("%s: %d/%d succeeded, %s requests per success, p99 %v, in %v", label, sum.Succeeded, n,
		formatFloat(sum.RequestsPerUpdate()), sum.P99.Round(time.Millisecond), sum.Wall.Round(time.Millisecond))
	st.problems = append(st.problems, contention.Problems(label, s, res)...)
	st.records = append(st.records, record{Phase: phase, Repetition: rep, Steps: s.Steps, Summary: sum, UpdatesPerWriter: st.plan.updates})
	// Each run has its own counter; the finished one only weighs on etcd.
	if err := st.cl.Client.CoreV1().ConfigMaps(st.cl.Namespace).Delete(st.ctx, name, metav1.DeleteOptions{}); err != nil {
		return sum, fmt.Errorf("%s: delete counter: %w", label, err)
	}
	return sum, nil
}

// sweepRecords returns the records of the sweep.
func sweepRecords(rs []record) []record {
	var out []record
	for _, r := range rs {
		if r.Phase == "sweep" {
			out = append(out, r)
		}
	}
	return out
}

// printTable writes, per strategy and writer count, the median and range
// of the repetitions' success rate, requests per success and p99.
func printTable(w io.Writer, names []string, rs []record) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "strategy\twriters\tsucceeded %\trequests/success\tp99 ms\twall ms\t")
	for _, name := range names {
		for _, g := range groups(rs, name) {
			cell := func(m metric) string {
				md, lo, hi, ok := g.stats(m)
				if !ok {
					return "-"
				}
				return fmt.Sprintf("%s (%s-%s)", formatFloat(md), formatFloat(lo), formatFloat(hi))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", name, g.writers, cell(metricSuccess), cell(metricRequests), cell(metricP99), cell(metricWall))
		}
	}
	tw.Flush()
}

// formatFloat keeps three significant digits.
func formatFloat(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

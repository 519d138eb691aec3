package fleetsim

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/lab/internal/apfsim"
)

var (
	run      = flag.Bool("fleetsim", false, "run the simulation's matrix (minutes to an hour; see make fleetsim)")
	sizes    = flag.String("fleetsim.sizes", "48,500,5000", "processes of the fleets, comma-separated")
	workers  = flag.String("fleetsim.workers", "1,4", "workers of each process, comma-separated")
	outages  = flag.String("fleetsim.outages", "5s,60s", "outage lengths, comma-separated")
	policies = flag.String("fleetsim.policies", "none,new", "policies: none, rev6 (only on revision 6's code, -tags fleetsim_rev6code), rev6~ (r near 1), new")
	reps     = flag.Int("fleetsim.reps", 1, "runs of each combination")
	csvPath  = flag.String("fleetsim.csv", defaultCSV, "CSV of the runs; rows of the same combination are replaced, others kept")
	timeline = flag.String("fleetsim.timeline", "", "PROCESSESxWORKERSxOUTAGE (5000x4x5s): write each policy's requests per bin of that run to fleet-sim-timeline.csv beside the CSV, replacing that policy's rows and dropping those of other runs")
	plots    = flag.Bool("fleetsim.plot", false, "draw the PNGs beside the CSV from it")
	goals    = flag.Bool("fleetsim.goals", false, "fail when the new schedule misses a goal at 5,000 processes")
	realCSV  = flag.String("fleetsim.real", "", "make fleet's fleet-apiserver.csv: print its figures beside the simulation's at 48 x 4 (with -fleetsim.plot)")
	realPair = flag.String("fleetsim.pairs", "no budget=none;NewBudget(), r fixed near 1=rev6~;NewBudget()=new", "the real runs' policies and the simulation's to set beside them, ;-separated")
	queueLen = flag.Int("fleetsim.queue", 20, "the level's queue length limit")
	getExec  = flag.Duration("fleetsim.get", 6*time.Millisecond, "mean execution time of a GET")
	putExec  = flag.Duration("fleetsim.put", 12*time.Millisecond, "mean execution time of a PUT")
	seatsPer = flag.Float64("fleetsim.seats", 10.0/48, "the level's seats per process (at least 10 in all)")
	requeue  = flag.Duration("fleetsim.requeue-max", 0, "cap the workers' wait after a failed call (0: client-go's 1000s); needs a -fleetsim.csv of its own")
)

const defaultCSV = "../../docs/fleet-sim.csv"

// level is the priority level for a fleet of n processes: the real run's
// (10 seats, hand size 4 of 64 queues) with seats in proportion to the
// processes, so that the fleet's steady load takes the same share of it.
func level(n int) apfsim.LevelConfig {
	return apfsim.LevelConfig{
		Name: "fleet", Seats: max(10, int(math.Round(*seatsPer*float64(n)))),
		Queues: 64, HandSize: 4, QueueLengthLimit: *queueLen,
		GetExec: *getExec, PutExec: *putExec, ResetDelay: time.Millisecond,
	}
}

func fleet(n, w int, outage time.Duration, newBudget func() *retry.Budget) apfsim.Fleet {
	return apfsim.Fleet{
		Processes: n, Workers: w, Level: level(n), NewBudget: newBudget,
		Warmup: 2 * time.Second, Before: 3 * time.Second, Outage: outage,
		After: 5 * time.Second, AfterMax: 60 * time.Second,
		Pace: 500 * time.Millisecond, RequeueMax: *requeue, Bin: 100 * time.Millisecond,
	}
}

// budgetOf returns the policy's Budget maker: nil for none.
func budgetOf(policy string) (func() *retry.Budget, error) {
	switch policy {
	case "none":
		return nil, nil
	case "rev6":
		return rev6Budget()
	case "rev6~":
		return rev6Approx()
	case "new":
		return newBudget()
	}
	return nil, fmt.Errorf("fleetsim: unknown policy %q", policy)
}

func TestFleetSim(t *testing.T) {
	if !*run {
		t.Skip("the simulation runs with -fleetsim (make fleetsim)")
	}
	ns, err := ints(*sizes)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := ints(*workers)
	if err != nil {
		t.Fatal(err)
	}
	if *requeue != 0 && filepath.Base(*csvPath) == filepath.Base(defaultCSV) {
		t.Fatalf("-fleetsim.requeue-max %v: write its runs to a CSV of their own (-fleetsim.csv), not to a fleet-sim.csv", *requeue)
	}
	var ds []time.Duration
	for _, s := range strings.Split(*outages, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("-fleetsim.outages: %v", err)
		}
		ds = append(ds, d)
	}
	rows, err := readRows(*csvPath)
	if err != nil {
		t.Fatal(err)
	}
	var bins []timelineRow
	for _, n := range ns {
		for _, w := range ws {
			for _, d := range ds {
				for _, pol := range strings.Split(*policies, ",") {
					nb, err := budgetOf(pol)
					if err != nil {
						t.Fatal(err)
					}
					for rep := range *reps {
						f := fleet(n, w, d, nb)
						var res *apfsim.Result
						wall := time.Now()
						synctest.Test(t, func(t *testing.T) {
							if res, err = f.Run(t.Context()); err != nil {
								t.Fatal(err)
							}
						})
						row := Row{Processes: n, Workers: w, Outage: d, Policy: pol, Rep: rep,
							Seats: f.Level.Seats, QueueLength: f.Level.QueueLengthLimit,
							Summary: res.Summarize(), Wall: time.Since(wall)}
						t.Logf("%6d x %d, %v, %-6s: %+v (%v)", n, w, d, pol, row.Summary, row.Wall.Round(time.Second))
						rows = replace(rows, row)
						if err := writeRows(*csvPath, rows); err != nil {
							t.Fatal(err)
						}
						if rep == 0 && *timeline == fmt.Sprintf("%dx%dx%v", n, w, d) {
							bins = append(bins, timelineOf(*timeline, pol, res)...)
						}
					}
				}
			}
		}
	}
	if len(bins) > 0 {
		path := filepath.Join(filepath.Dir(*csvPath), "fleet-sim-timeline.csv")
		old, err := readTimeline(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		old = slices.DeleteFunc(old, func(o timelineRow) bool {
			return o.Run != *timeline || slices.ContainsFunc(bins, func(b timelineRow) bool { return b.Policy == o.Policy })
		})
		if err := writeTimeline(path, append(old, bins...)); err != nil {
			t.Fatal(err)
		}
	}
	for _, line := range checkGoals(rows) {
		t.Log(line.text)
		if *goals && !line.met {
			t.Error(line.text)
		}
	}
}

func TestFleetSimPlot(t *testing.T) {
	if !*plots {
		t.Skip("the plots are drawn with -fleetsim.plot (make fleetsim)")
	}
	rows, err := readRows(*csvPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(*csvPath)
	plotted := slices.DeleteFunc(slices.Clone(rows), func(r Row) bool { return r.QueueLength != *queueLen })
	if err := drawScale(filepath.Join(dir, "fleet-sim.png"), plotted); err != nil {
		t.Fatal(err)
	}
	switch bins, err := readTimeline(filepath.Join(dir, "fleet-sim-timeline.csv")); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	default:
		if err := drawTimeline(filepath.Join(dir, "fleet-sim-timeline.png"), bins); err != nil {
			t.Fatal(err)
		}
	}
	var table strings.Builder
	if err := WriteTable(&table, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("the runs of %s:\n%s", *csvPath, table.String())
	for _, line := range checkGoals(rows) {
		t.Log(line.text)
	}
	if *realCSV == "" {
		return
	}
	f, err := os.Open(*realCSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := ReadReal(f)
	if err != nil {
		t.Fatal(err)
	}
	var pairs [][2]string
	for _, p := range strings.Split(*realPair, ";") {
		a, b, ok := strings.Cut(p, "=")
		if !ok {
			t.Fatalf("-fleetsim.pairs: %q is not REAL=SIM", p)
		}
		pairs = append(pairs, [2]string{a, b})
	}
	var check strings.Builder
	if err := WriteCheck(&check, runs, rows, pairs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the real apiserver beside the simulation:\n%s", check.String())
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("fleetsim: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func readRows(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ReadCSV(bytes.NewReader(b))
}

func writeRows(path string, rows []Row) error {
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// replace puts row in rows in place of the row of its combination, else
// in order.
func replace(rows []Row, row Row) []Row {
	key := func(r Row) string {
		return fmt.Sprintf("%08d %02d %010d %03d %s %03d", r.Processes, r.Workers, r.Outage, r.QueueLength, r.Policy, r.Rep)
	}
	rows = slices.DeleteFunc(rows, func(r Row) bool { return key(r) == key(row) })
	rows = append(rows, row)
	slices.SortStableFunc(rows, func(a, b Row) int { return strings.Compare(key(a), key(b)) })
	return rows
}

type verdict struct {
	text string
	met  bool
}

// checkGoals compares the new schedule with no budget at 5,000 processes:
// 429s in the 2s after the end at most 0.25x, p99 back within 2s, a 60s
// outage's requests at most 0.05x.
func checkGoals(rows []Row) []verdict {
	find := func(w int, d time.Duration, pol string) []Row {
		var out []Row
		for _, r := range rows {
			if r.Processes == 5000 && r.Workers == w && r.Outage == d && r.Policy == pol && r.QueueLength == *queueLen {
				out = append(out, r)
			}
		}
		return out
	}
	var vs []verdict
	for _, w := range []int{1, 4} {
		for _, d := range []time.Duration{5 * time.Second, 60 * time.Second} {
			none, ours := find(w, d, "none"), find(w, d, "new")
			if len(none) == 0 || len(ours) == 0 {
				continue
			}
			var n429, o429, nReq, oReq float64
			var p99 time.Duration
			for _, r := range none {
				n429 += float64(r.Summary.TooManyAfter) / float64(len(none))
				nReq += float64(r.Summary.RequestsDuring) / float64(len(none))
			}
			for _, r := range ours {
				o429 += float64(r.Summary.TooManyAfter) / float64(len(ours))
				oReq += float64(r.Summary.RequestsDuring) / float64(len(ours))
				p99 = max(p99, r.Summary.BackP99)
				if r.Summary.NotBack > 0 {
					p99 = time.Duration(math.MaxInt64)
				}
			}
			at := fmt.Sprintf("5,000 x %d, %v outage", w, d)
			vs = append(vs,
				verdict{fmt.Sprintf("%s: 429s after the end %.0f against %.0f without a budget (goal: at most 0.25x)", at, o429, n429), o429 <= 0.25*n429},
				verdict{fmt.Sprintf("%s: p99 back %v (goal: within 2s)", at, p99), p99 <= 2*time.Second})
			if d == 60*time.Second {
				vs = append(vs, verdict{fmt.Sprintf("%s: requests during it %.0f against %.0f without a budget, %.3fx (goal: at most 0.05x)", at, oReq, nReq, oReq/nReq), oReq <= 0.05*nReq})
			}
		}
	}
	return vs
}

// Command benchcheck checks the library's performance targets against the
// output of `make bench`. It reads two inputs:
//
//   - -raw: the raw `go test -bench` output of the root module and of
//     lab/bench (benchmem on), from which it takes allocs/op;
//   - -stat: benchstat's CSV of the side-by-side benchmarks, made with
//     -col '/impl@(clientgo kuberetry)' so client-go is the base, from which
//     it takes the medians (sec/op) and benchstat's verdict on each
//     difference ("-" means the file is standard input).
//
// The targets: this library is never slower than client-go's or
// apimachinery's counterpart in any side-by-side benchmark (benchstat
// finds no significant difference, or finds it faster, or finds it slower
// by no more than the noise floor of 10%; at least 4 rounds of each, for
// benchstat to be able to tell), and makes no allocation on
// the success path of its loops. It prints each target, what was
// measured and PASS or FAIL, and exits 1 if any target fails (a
// benchmark that is missing fails its target).
package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	raw := flag.String("raw", "bench.txt", "raw go test -bench output")
	stat := flag.String("stat", "-", "benchstat -format csv output of the side-by-side benchmarks")
	flag.Parse()

	allocs, err := readRaw(*raw)
	if err != nil {
		fail(err)
	}
	stats, err := readStat(*stat)
	if err != nil {
		fail(err)
	}
	results := check(allocs, stats)

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TARGET\tMEASURED\tRESULT")
	failed := 0
	for _, r := range results {
		verdict := "PASS"
		if !r.ok {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.target, r.measured, verdict)
	}
	w.Flush()
	if failed > 0 {
		fmt.Printf("%d of %d targets missed\n", failed, len(results))
		os.Exit(1)
	}
	fmt.Printf("all %d targets hold\n", len(results))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchcheck:", err)
	os.Exit(2)
}

type result struct {
	target   string
	measured string
	ok       bool
}

// Packages of the benchmarks, as the raw output's "pkg:" lines name them.
const (
	rootPkg  = "github.com/kuberetry/retry"
	benchPkg = "github.com/kuberetry/retry/lab/bench"
)

// sideBySide are the side-by-side benchmarks the guard needs: each must
// be in the benchstat table. Any other row of the table is held to the
// same target.
var sideBySide = []string{
	"OnErrorSuccess", "RetryOnConflictSuccess", "ZeroWaitRetries", "ConflictZeroWaitRetries",
	"BackoffStep", "RetryAfter", "ParseRetryAfterSeconds",
}

// successPath are the benchmarks of the loops' success path (fn returns
// nil at once), in the raw output: this library's side of the
// side-by-side ones and the root module's.
var successPath = []string{
	benchKey("OnErrorSuccess"), benchKey("RetryOnConflictSuccess"),
	rootKey("OnErrorSuccess"), rootKey("RetryOnConflictSuccess"), rootKey("OnErrorValueSuccess"),
}

// noiseFloor is the ratio of medians below which a difference that
// benchstat finds significant is still taken as measurement noise: on a
// shared 2-core machine the same code of a few nanoseconds moves by 5-10%
// between builds and runs (ParseRetryAfterSeconds, unchanged, measured
// 1.06x with p=0.021 in one run of 8 rounds and 1.08x with p=0.70 in
// another; docs/performance.md).
const noiseFloor = 1.10

// minRounds is the fewest rounds of each side with which benchstat's
// test (Mann-Whitney U, alpha 0.05) can find any difference significant:
// with fewer, its "~" says nothing.
const minRounds = 4

// check returns the guard's targets and whether each held: for every
// side-by-side benchmark, this library never slower than client-go's or
// apimachinery's counterpart (a difference benchstat finds insignificant,
// or a significant one in our favour, or a significant "+" whose ratio of
// medians stays within noiseFloor),
// with enough rounds for benchstat to tell; and no allocation on the
// success path.
func check(allocs map[string][]float64, stats map[string]map[string]row) []result {
	var out []result
	add := func(target, measured string, ok bool) {
		out = append(out, result{target, measured, ok})
	}
	names := slices.Clone(sideBySide)
	for name := range stats["sec/op"] {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		target := name + " never slower than its counterpart"
		r, ok := stats["sec/op"][name]
		if !ok {
			add(target, "no benchstat row", false)
			continue
		}
		measured := fmt.Sprintf("%.2fx (%s vs %s), %s (%s)", r.ours/r.base, ns(r.ours), ns(r.base), r.delta, r.p)
		n, err := rounds(r.p)
		switch {
		case err != nil:
			add(target, measured+": "+err.Error(), false)
		case n < minRounds:
			add(target, fmt.Sprintf("%s: %d rounds, too few to tell (make bench BENCH_COUNT=%d or more)", measured, n, minRounds), false)
		default:
			// benchstat prints "~" when the difference is not
			// significant, a signed percentage when it is.
			slower := strings.HasPrefix(r.delta, "+") && r.ours/r.base > noiseFloor
			add(target, measured, r.delta != "" && !slower)
		}
	}
	var parts []string
	ok := true
	for _, key := range successPath {
		vs, found := allocs[key]
		if !found || len(vs) == 0 {
			parts = append(parts, shortName(key)+" missing")
			ok = false
			continue
		}
		most := slices.Max(vs)
		parts = append(parts, fmt.Sprintf("%s %g", shortName(key), most))
		ok = ok && most == 0
	}
	add("success path 0 allocs/op (most of any round)", strings.Join(parts, ", "), ok)
	return out
}

// rounds returns the fewer of the two sides' sample counts in benchstat's
// P column ("p=0.002 n=6", or "n=4+6" when they differ).
func rounds(p string) (int, error) {
	_, n, found := strings.Cut(p, "n=")
	if !found {
		return 0, fmt.Errorf("no sample count in %q", p)
	}
	fewest := -1
	for f := range strings.SplitSeq(strings.Fields(n)[0], "+") {
		v, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("sample count in %q: %v", p, err)
		}
		if fewest < 0 || v < fewest {
			fewest = v
		}
	}
	return fewest, nil
}

// benchKey and rootKey name a benchmark in the raw output: package, then the
// name without "Benchmark" and without the GOMAXPROCS suffix.
func benchKey(name string) string { return benchPkg + " " + name + "/impl=kuberetry" }
func rootKey(name string) string  { return rootPkg + " " + name }

func shortName(key string) string {
	pkg, name, _ := strings.Cut(key, " ")
	if pkg == benchPkg {
		return name
	}
	return "root " + name
}

func ns(sec float64) string {
	return strconv.FormatFloat(sec*1e9, 'f', 2, 64) + "ns"
}

// readRaw returns the allocs/op of every run of every benchmark in the raw
// go test output, keyed by benchKey/rootKey.
func readRaw(path string) (map[string][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]float64{}
	pkg := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		// After the iteration count come value-unit pairs.
		for i := 2; i+1 < len(fields); i += 2 {
			if fields[i+1] != "allocs/op" {
				continue
			}
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %v", path, line, err)
			}
			key := pkg + " " + name
			out[key] = append(out[key], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results with allocs/op (run make bench first)", path)
	}
	return out, nil
}

// row is one benchmark of benchstat's CSV: the medians of client-go (base)
// and this library, and benchstat's comparison.
type row struct {
	base, ours float64
	delta      string // "~", "+12.34%", "-50.00%"
	p          string // "p=0.002 n=6"
}

// readStat reads benchstat's CSV: for each unit a header row naming the
// columns (clientgo, kuberetry), a row of units, then a row per benchmark:
// name, base, CI, ours, CI, vs base, P. It returns rows by unit and by
// benchmark name (without the GOMAXPROCS suffix).
func readStat(path string) (map[string]map[string]row, error) {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	out := map[string]map[string]row{}
	unit := ""
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, ",") {
			unit = "" // a blank line or a config line ("goos: linux") ends a table
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil {
			return nil, fmt.Errorf("benchstat csv: %q: %v", line, err)
		}
		switch {
		case rec[0] == "" && len(rec) >= 4 && rec[1] == "clientgo" && rec[3] == "kuberetry":
			unit = "?" // columns header; the units row follows
		case rec[0] == "" && unit == "?" && len(rec) >= 2:
			unit = rec[1]
		case rec[0] == "" && len(rec) >= 2:
			return nil, errors.New("benchstat csv: columns are not clientgo, kuberetry; use -col '/impl@(clientgo kuberetry)'")
		case unit != "" && unit != "?" && rec[0] != "geomean" && len(rec) >= 7:
			base, err1 := strconv.ParseFloat(rec[1], 64)
			ours, err2 := strconv.ParseFloat(rec[3], 64)
			if err1 != nil || err2 != nil {
				continue // a benchmark missing one column
			}
			name := rec[0]
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					name = name[:i]
				}
			}
			if out[unit] == nil {
				out[unit] = map[string]row{}
			}
			out[unit][name] = row{base: base, ours: ours, delta: rec[5], p: rec[6]}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out["sec/op"]) == 0 {
		return nil, errors.New("benchstat csv: no sec/op table (run make bench first)")
	}
	return out, nil
}

package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/lab/internal/partial"
)

// Targets of NewBudget() in the partial round, against no budget: the
// healthy calls at least minGoodput of those, their p99 at most
// max(maxP99Factor x, + maxP99Extra) that p99, and the failing group's
// requests at most maxFailing of those.
const (
	minGoodput   = 0.9
	maxP99Factor = 2
	maxP99Extra  = 50 * time.Millisecond
	maxFailing   = 0.25
)

// partialHeader names the columns of outages-partial.csv, one row per
// policy.
var partialHeader = []string{
	"policy", "healthy_calls", "healthy_per_s", "healthy_p50_ms", "healthy_p99_ms", "healthy_failed",
	"failing_requests", "failing_vs_no_budget", "retries", "refused", "held", "probes",
}

// partialRow returns r's figures in partialHeader's order; budget ones
// empty for a policy without a Budget.
func partialRow(rs []*partial.Result, r *partial.Result) []string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	row := []string{
		r.Policy, strconv.Itoa(len(r.Healthy)), strconv.FormatFloat(r.Goodput(), 'f', 1, 64),
		ms(r.Percentile(50)), ms(r.Percentile(99)), strconv.Itoa(r.HealthyFailed),
		strconv.Itoa(r.FailingRequests), strconv.FormatFloat(failingRatio(rs, r), 'f', 2, 64),
	}
	budget := []string{"", "", "", ""}
	if r.HasBudget {
		b := r.Budget
		budget = []string{strconv.FormatUint(b.Retries, 10), strconv.FormatUint(b.Refused, 10),
			strconv.FormatUint(b.Held, 10), strconv.FormatUint(b.Probes, 10)}
	}
	return append(row, budget...)
}

// failingRatio is r's failing requests over those without a budget (0
// without one).
func failingRatio(rs []*partial.Result, r *partial.Result) float64 {
	b := partial.Baseline(rs)
	if b == nil || b.FailingRequests == 0 {
		return 0
	}
	return float64(r.FailingRequests) / float64(b.FailingRequests)
}

func writePartialTable(w io.Writer, rs []*partial.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\thealthy calls\t/s\tp50 ms\tp99 ms\tfailed\tfailing group's requests\tvs no budget\tretries\trefused\theld\tprobes\t")
	for _, r := range rs {
		row := partialRow(rs, r)
		for i, f := range row {
			if f == "" {
				row[i] = "-"
			}
		}
		for _, f := range row {
			fmt.Fprintf(tw, "%s\t", f)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func writePartialCSV(path string, rs []*partial.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(partialHeader)
	for _, r := range rs {
		w.Write(partialRow(rs, r))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// partialVerdicts prints whether NewBudget() met its targets in the
// partial round and returns what it missed.
func partialVerdicts(w io.Writer, rs []*partial.Result) []string {
	base := partial.Baseline(rs)
	var ours *partial.Result
	for _, r := range rs {
		if r.Policy == outage.Ours.Name {
			ours = r
		}
	}
	if base == nil || ours == nil {
		return nil
	}
	fmt.Fprintln(w)
	var missed []string
	check := func(ok bool, format string, args ...any) {
		line := fmt.Sprintf("partial failure: NewBudget() "+format, args...)
		fmt.Fprintf(w, "%s: %s\n", line, okWord(ok))
		if !ok {
			missed = append(missed, line)
		}
	}
	calls, baseCalls := len(ours.Healthy), len(base.Healthy)
	check(float64(calls) >= minGoodput*float64(baseCalls),
		"%d healthy calls, %.2fx the %d without a budget, want at least %.1fx", calls, float64(calls)/float64(max(baseCalls, 1)), baseCalls, minGoodput)
	p99, baseP99 := ours.Percentile(99), base.Percentile(99)
	limit := max(maxP99Factor*baseP99, baseP99+maxP99Extra)
	check(p99 <= limit, "healthy p99 %v, %v without a budget, want at most %v", p99.Round(time.Millisecond), baseP99.Round(time.Millisecond), limit.Round(time.Millisecond))
	check(ours.HealthyFailed == 0, "%d healthy calls failed (first: %v), want none", ours.HealthyFailed, ours.FirstHealthyErr)
	check(float64(ours.FailingRequests) <= maxFailing*float64(base.FailingRequests),
		"%d requests to the failing group, %.2fx the %d without a budget, want at most %.2fx",
		ours.FailingRequests, failingRatio(rs, ours), base.FailingRequests, maxFailing)
	return missed
}

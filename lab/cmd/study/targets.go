package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// The target of HotObjectBackoff with a Contention (docs/contention.md),
// at every writer count, against the best peer there: of the peers whose
// median repetition got at least bestThrough of the updates through, the
// one with the lowest median p99. HotObjectBackoff with a Contention must
// get every update through in every repetition, its median p99 at most
// p99Ratio times the best's or p99Slack above it, and its median requests
// per update at most reqsRatio times the best's. HotObjectBackoff alone
// must get every update through.
const (
	bestThrough = 0.99
	p99Ratio    = 1.5
	p99Slack    = 20 * time.Millisecond
	reqsRatio   = 1.25
)

// asserted are the forms whose misses fail the study: Update's, the form
// the contract is for (every write loop's); the idiom's are reported.
var asserted = []string{formUpdate}

// verdict is the comparison at one writer count of one form.
type verdict struct {
	form    string
	writers int
	best    string  // the best peer, "" when none got bestThrough through
	bestP99 float64 // ms
	bestReq float64
	hotP99  float64 // HotObjectBackoff + Contention's, ms
	hotReq  float64
	// hotAll and aloneAll: every repetition got every update through.
	hotAll, aloneAll bool
	hasHot, hasAlone bool
}

// misses returns what v misses of the target.
func (v verdict) misses() []string {
	var m []string
	at := fmt.Sprintf("%s at %d writers", v.form, v.writers)
	if v.hasHot {
		if !v.hotAll {
			m = append(m, fmt.Sprintf("%s: %s did not get every update through", at, nameHotContention))
		}
		if v.best != "" {
			if limit := max(p99Ratio*v.bestP99, v.bestP99+float64(p99Slack)/float64(time.Millisecond)); !(v.hotP99 <= limit) {
				m = append(m, fmt.Sprintf("%s: %s's p99 %.1fms is %.2fx %s's %.1fms, over %.1fms (%.2gx or +%v)",
					at, nameHotContention, v.hotP99, v.hotP99/v.bestP99, v.best, v.bestP99, limit, p99Ratio, p99Slack))
			}
			if limit := reqsRatio * v.bestReq; !(v.hotReq <= limit) {
				m = append(m, fmt.Sprintf("%s: %s's requests per update %.2f are %.2fx %s's %.2f, over %.2gx",
					at, nameHotContention, v.hotReq, v.hotReq/v.bestReq, v.best, v.bestReq, reqsRatio))
			}
		}
	}
	if v.hasAlone && !v.aloneAll {
		m = append(m, fmt.Sprintf("%s: %s alone did not get every update through", at, nameHot))
	}
	return m
}

// verdicts compares, for each form and writer count in rs, HotObjectBackoff
// with the best peer.
func verdicts(rs []record) []verdict {
	var vs []verdict
	for _, f := range forms {
		frs := byForm(rs, f)
		var counts []int
		for _, r := range frs {
			if !slices.Contains(counts, r.Writers) {
				counts = append(counts, r.Writers)
			}
		}
		slices.Sort(counts)
		for _, n := range counts {
			v := verdict{form: f, writers: n}
			for _, name := range peers {
				g, ok := groupAt(frs, name, n)
				if !ok {
					continue
				}
				through, _, _, _ := g.stats(metricSuccess)
				p99, _, _, _ := g.stats(metricP99)
				req, _, _, okReq := g.stats(metricRequests)
				if through < 100*bestThrough || !okReq {
					continue
				}
				if v.best == "" || p99 < v.bestP99 {
					v.best, v.bestP99, v.bestReq = name, p99, req
				}
			}
			if g, ok := groupAt(frs, nameHotContention, n); ok {
				v.hasHot, v.hotAll = true, allThrough(g)
				v.hotP99, _, _, _ = g.stats(metricP99)
				v.hotReq, _, _, _ = g.stats(metricRequests)
			}
			if g, ok := groupAt(frs, nameHot, n); ok {
				v.hasAlone, v.aloneAll = true, allThrough(g)
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// groupAt returns the runs of strategy name at writers writers in rs.
func groupAt(rs []record, name string, writers int) (group, bool) {
	for _, g := range groups(rs, name) {
		if g.writers == writers {
			return g, true
		}
	}
	return group{}, false
}

// allThrough reports whether every run of g got every update through.
func allThrough(g group) bool {
	for _, r := range g.runs {
		if r.Succeeded != r.Updates {
			return false
		}
	}
	return true
}

// checkTargets writes the verdict at each writer count of each form to w
// and returns the misses of the asserted forms.
func checkTargets(w io.Writer, rs []record) (missed []string) {
	vs := verdicts(rs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "form\twriters\tbest peer (>= %.0f%% through)\tbest p99 ms\tbest req/update\t%s p99 ms\treq/update\tp99 ratio\treq ratio\tverdict\t\n",
		100*bestThrough, nameHotContention)
	for _, v := range vs {
		word := "met"
		m := v.misses()
		switch {
		case len(m) > 0 && slices.Contains(asserted, v.form):
			word = "MISSED"
			missed = append(missed, m...)
		case len(m) > 0:
			word = "missed (reported only)"
		case !v.hasHot:
			word = "not run"
		}
		best := v.best
		if best == "" {
			best = "none"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.2f\t%.1f\t%.2f\t%.2fx\t%.2fx\t%s\t\n",
			v.form, v.writers, best, v.bestP99, v.bestReq, v.hotP99, v.hotReq, v.hotP99/v.bestP99, v.hotReq/v.bestReq, word)
	}
	tw.Flush()
	return missed
}

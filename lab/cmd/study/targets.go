package main

import (
	"fmt"
	"io"
)

// hotTarget is what the study holds HotObjectBackoff to, against the
// README's x1.2 exponential in the same run, at one writer count: its
// median requests per success and its median p99 at most these multiples
// of the README's.
type hotTarget struct {
	writers   int
	reqs, p99 float64
}

// hotTargets are the study's claims for HotObjectBackoff (docs/contention.md,
// "The study"): at 64 writers fewer requests and a lower p99 than the
// README's (measured 0.31x and 0.58x); at 16 writers fewer requests
// (0.51x), the p99 higher, since a conflict costs at least 200ms (1.98x),
// but within 3x. A wall-clock ratio a loaded machine can break, so the
// study asserts it and the integration test only reports it.
var hotTargets = []hotTarget{
	{writers: 16, reqs: 0.8, p99: 3},
	{writers: 64, reqs: 0.7, p99: 1},
}

// checkTargets writes, for each of hotTargets whose writer count the
// sweep records rs hold for both strategies, the medians and whether they
// meet it, and returns what was missed.
func checkTargets(w io.Writer, rs []record) (missed []string) {
	median := func(name string, writers int, m metric) (float64, bool) {
		for _, g := range groups(rs, name) {
			if g.writers == writers {
				med, _, _, ok := g.stats(m)
				return med, ok
			}
		}
		return 0, false
	}
	checked := 0
	for _, tg := range hotTargets {
		hotReqs, ok1 := median(nameHotObject, tg.writers, metricRequests)
		readmeReqs, ok2 := median(nameReadme, tg.writers, metricRequests)
		hotP99, ok3 := median(nameHotObject, tg.writers, metricP99)
		readmeP99, ok4 := median(nameReadme, tg.writers, metricP99)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		checked++
		for _, c := range []struct {
			what       string
			hot, other float64
			max        float64
		}{
			{"requests per success", hotReqs, readmeReqs, tg.reqs},
			{"p99 ms", hotP99, readmeP99, tg.p99},
		} {
			ratio := c.hot / c.other
			met := ratio <= c.max // NaN (no README figure) misses
			fmt.Fprintf(w, "HotObjectBackoff at %d writers: median %s %s against the README's %s, %.2fx, target at most %.2gx: %s\n",
				tg.writers, c.what, formatFloat(c.hot), formatFloat(c.other), ratio, c.max, okWord(met))
			if !met {
				missed = append(missed, fmt.Sprintf("HotObjectBackoff at %d writers: median %s %.2fx the README's, want at most %.2gx",
					tg.writers, c.what, ratio, c.max))
			}
		}
	}
	if checked == 0 {
		fmt.Fprintln(w, "HotObjectBackoff's targets are at 16 and 64 writers, which this run did not sweep: not checked")
	}
	return missed
}

func okWord(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

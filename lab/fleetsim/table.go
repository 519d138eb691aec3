package fleetsim

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"
)

// WriteTable writes rows as a Markdown table, a line per combination (the
// mean of its reps; the largest max back), in rows' order, with the
// requests during the outage and the 429s after it against no budget's.
func WriteTable(w io.Writer, rows []Row) error {
	type key struct {
		n, w, q int
		d       time.Duration
		pol     string
	}
	type agg struct {
		runs                     int
		before, during, probes   float64
		tooMany, p50, p99, later float64
		max                      time.Duration
		notBack                  int
		retryAfter               int64
	}
	var order []key
	aggs := map[key]*agg{}
	for _, r := range rows {
		k := key{r.Processes, r.Workers, r.QueueLength, r.Outage, r.Policy}
		a, ok := aggs[k]
		if !ok {
			a = &agg{}
			aggs[k] = a
			order = append(order, k)
		}
		s := r.Summary
		a.runs++
		a.before += s.RequestsBefore
		a.during += float64(s.RequestsDuring)
		a.probes += float64(s.ProbesDuring)
		a.tooMany += float64(s.TooManyAfter)
		a.later += float64(s.TooManyLater)
		a.p50 += s.BackP50.Seconds()
		a.p99 += s.BackP99.Seconds()
		a.max = max(a.max, s.BackMax)
		a.notBack += s.NotBack
		a.retryAfter = max(a.retryAfter, s.MaxRetryAfter)
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.n, b.n), cmp.Compare(a.w, b.w), cmp.Compare(a.q, b.q), cmp.Compare(a.d, b.d),
			cmp.Compare(slices.Index(policyOrder, a.pol), slices.Index(policyOrder, b.pol)))
	})
	ratio := func(x, base float64) string {
		if base == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", x/base)
	}
	if _, err := fmt.Fprintln(w, "| processes x workers | queues of | outage | policy | runs | requests/s before | requests during the outage | per process | probes | vs no budget | 429s 2 s after | vs no budget | 429s after, all | max Retry-After | back p50 | p99 | max |\n"+
		"| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"); err != nil {
		return err
	}
	for _, k := range order {
		a := aggs[k]
		n := float64(a.runs)
		none := aggs[key{k.n, k.w, k.q, k.d, "none"}]
		vsReq, vs429 := "-", "-"
		if none != nil && k.pol != "none" {
			nn := float64(none.runs)
			vsReq, vs429 = ratio(a.during/n, none.during/nn), ratio(a.tooMany/n, none.tooMany/nn)
		}
		maxBack := fmt.Sprintf("%.2f s", a.max.Seconds())
		if a.notBack > 0 {
			maxBack = fmt.Sprintf("%d not back", a.notBack)
		}
		if _, err := fmt.Fprintf(w, "| %d x %d | %d | %v | %s | %d | %.0f | %.0f | %.1f | %.0f | %s | %.0f | %s | %.0f | %d s | %.2f s | %.2f s | %s |\n",
			k.n, k.w, k.q, k.d, policyNames[k.pol], a.runs, a.before/n, a.during/n, a.during/n/float64(k.n), a.probes/n, vsReq,
			a.tooMany/n, vs429, a.later/n, a.retryAfter, a.p50/n, a.p99/n, maxBack); err != nil {
			return err
		}
	}
	return nil
}

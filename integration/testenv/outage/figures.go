package outage

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kuberetry/retry"
)

// PhaseRequests returns the requests to configmaps sent in phase p,
// client-go's own resends included.
func (r *Result) PhaseRequests(p Phase) int {
	return r.Requests[p+1].Sub(r.Requests[p]).Resource("configmaps")
}

// OutageRequests returns the requests sent during the outage.
func (r *Result) OutageRequests() int { return r.PhaseRequests(During) }

// OutageConnections returns the connections the proxy accepted during the
// outage (each reset at once).
func (r *Result) OutageConnections() int64 {
	return r.Proxy[After].Accepted - r.Proxy[During].Accepted
}

// outageEnd is when the outage ended.
func (r *Result) outageEnd() time.Duration { return r.Bounds[After] }

// Recovery returns how long after the outage the last worker to do so had
// a call return nil (a call that returned after the outage), and false if
// a worker never did.
func (r *Result) Recovery() (time.Duration, bool) {
	back := make([]time.Duration, r.Sched.Workers)
	seen := make([]bool, r.Sched.Workers)
	for _, c := range r.Calls {
		if c.End >= r.outageEnd() && c.Err == nil && (!seen[c.Worker] || c.End < back[c.Worker]) {
			back[c.Worker], seen[c.Worker] = c.End, true
		}
	}
	last := time.Duration(0)
	for w := range back {
		if !seen[w] {
			return 0, false
		}
		last = max(last, back[w]-r.outageEnd())
	}
	return last, true
}

// NextCalls returns, per worker, its next call after the outage: the
// first that returned after the outage ended (ok false for a worker with
// none).
func (r *Result) NextCalls() (next []Call, ok []bool) {
	next, ok = make([]Call, r.Sched.Workers), make([]bool, r.Sched.Workers)
	for _, c := range r.Calls {
		if c.End >= r.outageEnd() && (!ok[c.Worker] || c.End < next[c.Worker].End) {
			next[c.Worker], ok[c.Worker] = c, true
		}
	}
	return next, ok
}

// LastBack describes the calls of the worker that came back last (or
// never), from 2s before the outage's end: what kept it.
func (r *Result) LastBack() string {
	last, worst := -1, time.Duration(-1)
	back := make([]time.Duration, r.Sched.Workers)
	for w := range back {
		back[w] = -1
	}
	for _, c := range r.Calls {
		if c.End >= r.outageEnd() && c.Err == nil && (back[c.Worker] < 0 || c.End < back[c.Worker]) {
			back[c.Worker] = c.End
		}
	}
	for w, t := range back {
		if t < 0 {
			t = time.Duration(1 << 62)
		}
		if t > worst {
			last, worst = w, t
		}
	}
	var b strings.Builder
	for _, c := range r.Calls {
		if c.Worker == last && c.End >= r.outageEnd()-2*time.Second && (worst < 0 || c.Start <= worst) {
			fmt.Fprintf(&b, "worker %d call %s: %v to %v after the outage's end, sent %v, err %v\n", c.Worker, c.Key(),
				(c.Start - r.outageEnd()).Round(time.Millisecond), (c.End - r.outageEnd()).Round(time.Millisecond), c.Sent, c.Err)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Goodput returns the successful calls per second in the healthy phase
// before the outage and in the GoodputWindow after it, each counted by
// when the call returned.
func (r *Result) Goodput() (before, after float64) {
	var nb, na int
	for _, c := range r.Calls {
		switch {
		case c.Err != nil:
		case c.End >= r.Bounds[Before] && c.End < r.Bounds[During]:
			nb++
		case c.End >= r.outageEnd() && c.End < r.outageEnd()+GoodputWindow:
			na++
		}
	}
	return float64(nb) / (r.Bounds[During] - r.Bounds[Before]).Seconds(), float64(na) / GoodputWindow.Seconds()
}

// GoodputRatio is Goodput's after over before.
func (r *Result) GoodputRatio() float64 {
	b, a := r.Goodput()
	if b == 0 {
		return 0
	}
	return a / b
}

// UnsentFailures returns the calls that failed with no request of theirs
// reaching the transport (not counting the calls the run's end cut).
func (r *Result) UnsentFailures() []Call {
	var out []Call
	for _, c := range r.Calls {
		if c.Err != nil && !c.Sent && !c.Shutdown {
			out = append(out, c)
		}
	}
	return out
}

// BudgetDelta returns what the budget counted from the start of phase
// from to the start of phase to (numPhases: the run's end).
func (r *Result) BudgetDelta(from, to Phase) retry.BudgetStats {
	return StatsDelta(r.Budget[from], r.Budget[to])
}

// BudgetFigures returns what the budget did over the run: retries
// granted, retries refused, refusals after the outage's end, first
// attempts held and probes.
func (r *Result) BudgetFigures() [5]uint64 {
	d := r.BudgetDelta(Before, numPhases)
	return [5]uint64{d.Retries, d.Refused, r.BudgetDelta(After, numPhases).Refused, d.Held, d.Probes}
}

// StatsDelta returns what a budget counted from a to b.
func StatsDelta(a, b retry.BudgetStats) retry.BudgetStats {
	return retry.BudgetStats{
		FirstAttempts: b.FirstAttempts - a.FirstAttempts,
		Retries:       b.Retries - a.Retries,
		Refused:       b.Refused - a.Refused,
		Held:          b.Held - a.Held,
		Probes:        b.Probes - a.Probes,
	}
}

// LostWrite is in each of Integrity's problems that is a lost write.
const LostWrite = "a lost write"

// Integrity returns what is wrong with the written data: a call that
// returned nil whose key is missing (a lost write), a count above or
// below the keys present (a call applied twice, or a key written without
// its count), a key no call made or with another value.
func (r *Result) Integrity() []string {
	var bad []string
	made := make([]map[string]Call, r.Sched.Workers)
	for w := range made {
		made[w] = map[string]Call{}
	}
	for _, c := range r.Calls {
		made[c.Worker][c.Key()] = c
	}
	for w, data := range r.Data {
		keys := 0
		for k, v := range data {
			if k == countKey {
				continue
			}
			keys++
			c, ok := made[w][k]
			if !ok || v != strconv.Itoa(c.Seq) {
				bad = append(bad, fmt.Sprintf("worker %d: key %s=%q was written by no call of that worker", w, k, v))
			}
		}
		if n := data[countKey]; n != strconv.Itoa(keys) {
			bad = append(bad, fmt.Sprintf("worker %d: count %s, %d keys present (a call applied twice, or a key without its count)", w, n, keys))
		}
		for k, c := range made[w] {
			if _, ok := data[k]; c.Err == nil && !ok {
				bad = append(bad, fmt.Sprintf("worker %d: call %s returned nil and its key is missing (%s)", w, k, LostWrite))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// Landed returns the calls that returned an error and whose key is on the
// server all the same (the write landed, its answer was lost), and the
// calls that returned nil.
func (r *Result) Landed() (lostAnswers, succeeded int) {
	for _, c := range r.Calls {
		if c.Err == nil {
			succeeded++
		} else if _, ok := r.Data[c.Worker][c.Key()]; ok {
			lostAnswers++
		}
	}
	return lostAnswers, succeeded
}

// Baseline returns the first run in rs without a budget for r's caller,
// number of workers and outage length, or nil.
func Baseline(rs []*Result, r *Result) *Result {
	for _, b := range rs {
		if b.Caller == r.Caller && b.Sched.Workers == r.Sched.Workers && b.Sched.Outage == r.Sched.Outage && b.Policy == NoBudget.Name {
			return b
		}
	}
	return nil
}

// Ratio returns r's outage requests over its baseline's in rs (0 without one).
func Ratio(rs []*Result, r *Result) float64 {
	b := Baseline(rs, r)
	if b == nil || b.OutageRequests() == 0 {
		return 0
	}
	return float64(r.OutageRequests()) / float64(b.OutageRequests())
}

// Recovered formats Recovery.
func (r *Result) Recovered() string {
	d, ok := r.Recovery()
	if !ok {
		return "never"
	}
	return d.Round(10 * time.Millisecond).String()
}

// WriteTable writes one line per run: the outage's length, its requests
// and connections against the run without a budget of the same caller,
// workers and length; when every worker was back; goodput after the
// outage against before; and what the budget did.
func WriteTable(w io.Writer, rs []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "outage\tcaller\tpolicy\trequests in outage\tvs no budget\tconnections\tlast worker back\tgoodput before/s\tafter/s\tafter/before\tretries\trefused\trefused after\theld\tprobes\t")
	for _, r := range rs {
		before, after := r.Goodput()
		budget := [5]string{"-", "-", "-", "-", "-"}
		if r.HasBudget {
			for i, n := range r.BudgetFigures() {
				budget[i] = strconv.FormatUint(n, 10)
			}
		}
		fmt.Fprintf(tw, "%v\t%s\t%s\t%d\t%.2fx\t%d\t%s\t%.1f\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Sched.Outage, r.Caller.Short(), r.Policy, r.OutageRequests(), Ratio(rs, r), r.OutageConnections(), r.Recovered(),
			before, after, r.GoodputRatio(), budget[0], budget[1], budget[2], budget[3], budget[4])
	}
	return tw.Flush()
}

// String describes one run by phase.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s: %d calls in %v\n", r.Caller, r.Policy, len(r.Calls), r.Bounds[numPhases].Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tlength\tcalls ended\tfailed\trequests\tconnections\t")
	for p := range numPhases {
		calls, failed := 0, 0
		for _, c := range r.Calls {
			if c.End >= r.Bounds[p] && c.End < r.Bounds[p+1] {
				calls++
				if c.Err != nil {
					failed++
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t\n", p, (r.Bounds[p+1] - r.Bounds[p]).Round(100*time.Millisecond),
			calls, failed, r.PhaseRequests(p), r.Proxy[p+1].Accepted-r.Proxy[p].Accepted)
	}
	tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The messages of LogHolds' lines.
const (
	holdStart    = "retry budget holds requests"
	holdReminder = "retry budget still holds requests"
	holdEnd      = "retry budget released requests"
)

// zapLine is what a line of controller-runtime's zap logger carries that
// this command reads.
type zapLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// klogLine matches a klog header: "E1205 21:40:01.123456   12345 file.go:123] ".
var klogLine = regexp.MustCompile(`^[IWEF]\d{4} \S+\s+\d+ ([^\]]+)\] (.*)$`)

// kindOf names a line: zap's "msg", or klog's source and the start of its
// message; isZap reports whether zap wrote it.
func kindOf(text string) (kind string, isZap bool) {
	var z zapLine
	if strings.HasPrefix(text, "{") && json.Unmarshal([]byte(text), &z) == nil {
		return z.Msg, true
	}
	if m := klogLine.FindStringSubmatch(text); m != nil {
		msg := strings.TrimPrefix(m[2], `"`)
		if i := strings.IndexAny(msg, ":\""); i > 0 {
			msg = msg[:i]
		}
		return "klog " + m[1] + ": " + strings.TrimSpace(msg), false
	}
	return "other", false
}

// between returns the lines that arrived in [from, to).
func between(lines []line, from, to time.Time) []line {
	var out []line
	for _, l := range lines {
		if !l.at.Before(from) && l.at.Before(to) {
			out = append(out, l)
		}
	}
	return out
}

// lineCounts counts lines by kind: zap's and klog's, and each kind.
type lineCounts struct {
	zap, klog, other int
	byKind           map[string]int
}

func countLines(lines []line) lineCounts {
	c := lineCounts{byKind: make(map[string]int)}
	for _, l := range lines {
		kind, isZap := kindOf(l.text)
		switch {
		case isZap:
			c.zap++
		case strings.HasPrefix(kind, "klog "):
			c.klog++
		default:
			c.other++
		}
		c.byKind[kind]++
	}
	return c
}

func (c lineCounts) total() int { return c.zap + c.klog + c.other }

func (c lineCounts) String() string {
	kinds := make([]string, 0, len(c.byKind))
	for k := range c.byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if c.byKind[kinds[i]] != c.byKind[kinds[j]] {
			return c.byKind[kinds[i]] > c.byKind[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %q", c.byKind[k], k)
	}
	return fmt.Sprintf("%d (zap %d, klog %d): %s", c.total(), c.zap, c.klog, strings.Join(parts, ", "))
}

// requests returns the requests on the wire during the outage, by kind,
// and whether the count is whole (the manager answered the scrape at the
// outage's end).
func (o *outcome) requests(kind string) (n float64, whole bool) {
	end := o.atEnd
	if end == nil {
		last := o.lastScrapeBefore(o.end)
		if last == nil {
			return 0, false
		}
		end = last
	}
	sel := []string{}
	if kind != "" {
		sel = append(sel, `kind="`+kind+`"`)
	}
	return end.sum("operator_lab_wire_requests_total", sel...) - o.atStart.sum("operator_lab_wire_requests_total", sel...), o.atEnd != nil
}

func (o *outcome) lastScrapeBefore(t time.Time) *scrape {
	var last *scrape
	for i := range o.scrapes {
		if o.scrapes[i].at.Before(t) {
			last = &o.scrapes[i]
		}
	}
	return last
}

// final is the run's last scrape.
func (o *outcome) final() scrape {
	if len(o.scrapes) == 0 {
		return *o.atStart
	}
	return o.scrapes[len(o.scrapes)-1]
}

// leadershipLost returns when the manager logged that it lost its
// leadership (zero if it did not).
func (o *outcome) leadershipLost() time.Time {
	for _, l := range o.lines {
		if strings.Contains(l.text, "leader election lost") || strings.Contains(l.text, "failed to renew lease") {
			return l.at
		}
	}
	return time.Time{}
}

// holdLines returns LogHolds' lines.
func (o *outcome) holdLines() []line {
	var out []line
	for _, l := range o.lines {
		if kind, _ := kindOf(l.text); strings.HasPrefix(kind, "retry budget ") {
			out = append(out, l)
		}
	}
	return out
}

// firstAfter returns the first line of msg at or after t.
func firstAfter(lines []line, msg string, t time.Time) (line, bool) {
	for _, l := range lines {
		if kind, _ := kindOf(l.text); kind == msg && !l.at.Before(t) {
			return l, true
		}
	}
	return line{}, false
}

// recovery returns how long after the outage's end the manager's first
// write landed, and the copy of the object created then.
func (o *outcome) recovery() (first, fresh time.Duration, okFirst, okFresh bool) {
	for _, w := range o.writes {
		if w.at.Before(o.end) {
			continue
		}
		if !okFirst {
			first, okFirst = w.at.Sub(o.end), true
		}
		if w.name == o.fresh+"-out" && !okFresh {
			fresh, okFresh = w.at.Sub(o.end), true
		}
	}
	return first, fresh, okFirst, okFresh
}

// exitedDuring reports whether the manager exited before the run's end.
func (o *outcome) exitedDuring() bool { return !o.exited.IsZero() && o.exited.Before(o.stop) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// print writes o's figures.
func (o *outcome) print(w io.Writer) {
	fmt.Fprintf(w, "\n%v\n", o.spec)
	during := countLines(between(o.lines, o.start, o.end))
	fmt.Fprintf(w, "  log lines during the outage: %v\n", during)
	after := countLines(between(o.lines, o.end, o.end.Add(5*time.Second)))
	fmt.Fprintf(w, "  log lines in the 5s after it: %v\n", after)
	all, whole := o.requests("")
	leases, _ := o.requests("lease")
	watches, _ := o.requests("watch")
	note := ""
	if !whole {
		note = " (at least: the manager was gone at the end)"
	}
	fmt.Fprintf(w, "  requests on the wire during it: %.0f%s (Leases %.0f, watches %.0f, other %.0f); connections the proxy reset at once: %d\n",
		all, note, leases, watches, all-leases-watches, o.proxy.OutageRejects-o.proxyAtStart.OutageRejects)
	if lost := o.leadershipLost(); !lost.IsZero() {
		fmt.Fprintf(w, "  leadership: lost, logged %s after the outage's start", secs(lost.Sub(o.start)))
	} else {
		fmt.Fprint(w, "  leadership: kept")
	}
	if o.exitedDuring() {
		fmt.Fprintf(w, "; the manager exited with status %d %s after the outage's start\n", o.exitCode, secs(o.exited.Sub(o.start)))
	} else {
		fmt.Fprint(w, "; the manager ran on\n")
	}
	end := o.final()
	d := func(name string, labels ...string) float64 {
		return end.sum(name, labels...) - o.atStart.sum(name, labels...)
	}
	fmt.Fprintf(w, "  reconciles from the outage's start to the run's end: success %.0f, error %.0f, requeue_after %.0f, requeue %.0f; "+
		"work queue retries %.0f; the reconciler's errors: budget %.0f, probe %.0f, context %.0f, other %.0f\n",
		d("controller_runtime_reconcile_total", `result="success"`), d("controller_runtime_reconcile_total", `result="error"`),
		d("controller_runtime_reconcile_total", `result="requeue_after"`), d("controller_runtime_reconcile_total", `result="requeue"`),
		d("workqueue_retries_total", `name="copy"`),
		d("operator_lab_reconcile_errors_total", `kind="budget"`), d("operator_lab_reconcile_errors_total", `kind="probe"`),
		d("operator_lab_reconcile_errors_total", `kind="context"`), d("operator_lab_reconcile_errors_total", `kind="other"`))
	first, fresh, okFirst, okFresh := o.recovery()
	fmt.Fprint(w, "  recovery after the end:")
	if l, ok := firstAfter(o.lines, holdEnd, o.start); ok {
		fmt.Fprintf(w, " the hold released %s after;", secs(l.at.Sub(o.end)))
	}
	if okFirst {
		fmt.Fprintf(w, " the first write %s after;", secs(first))
	} else {
		fmt.Fprint(w, " no write after;")
	}
	if okFresh {
		fmt.Fprintf(w, " the object created at the end copied %s after\n", secs(fresh))
	} else {
		fmt.Fprint(w, " the object created at the end never copied\n")
	}
	held, scrapes, firstHeld := 0, 0, time.Duration(-1)
	for _, s := range o.scrapes {
		if s.at.Before(o.start) || !s.at.Before(o.end) {
			continue
		}
		scrapes++
		if s.has("kuberetry_budget_hold_seconds") {
			held++
			if firstHeld < 0 {
				firstHeld = s.at.Sub(o.start)
			}
		}
	}
	fmt.Fprintf(w, "  kuberetry_budget_hold_seconds in %d of the %d scrapes during the outage", held, scrapes)
	if firstHeld >= 0 {
		fmt.Fprintf(w, ", first %s after its start", secs(firstHeld))
	}
	fmt.Fprintf(w, "; rest_client_requests_total{code=\"<error>\"} +%.0f during it\n",
		func() float64 {
			e := end
			if o.atEnd != nil {
				e = *o.atEnd
			}
			return e.sum("rest_client_requests_total", `code="<error>"`) - o.atStart.sum("rest_client_requests_total", `code="<error>"`)
		}())
	var moves []string
	for _, m := range moved(*o.atStart, end, "kuberetry_", "controller_runtime_", "workqueue_", "rest_client_requests", "leader_election_", "operator_lab_") {
		moves = append(moves, fmt.Sprintf("%s +%.0f", m.name, m.by))
	}
	fmt.Fprintf(w, "  counters that moved from the outage's start to the run's end: %s\n", strings.Join(moves, ", "))
	if hl := o.holdLines(); len(hl) > 0 {
		fmt.Fprint(w, "  the hold's lines, as zap wrote them (time from the outage's start):\n")
		for _, l := range hl {
			fmt.Fprintf(w, "    %+6.2fs %s\n", l.at.Sub(o.start).Seconds(), l.text)
		}
	}
	if l, ok := reconcilerError(between(o.lines, o.start, o.end)); ok {
		fmt.Fprintf(w, "  a \"Reconciler error\" line during the outage (its stacktrace cut):\n    %s\n", cutStacktrace(l.text))
	}
	if o.exitedDuring() {
		fmt.Fprint(w, "  the manager's last lines (their stacktraces cut):\n")
		for _, l := range o.lines[max(0, len(o.lines)-4):] {
			fmt.Fprintf(w, "    %+6.2fs %s\n", l.at.Sub(o.start).Seconds(), cutStacktrace(l.text))
		}
	}
}

// summary writes a table of the runs.
func summary(w io.Writer, outcomes []*outcome) {
	fmt.Fprint(w, "\n| load | budget | outage | log lines during it (zap, klog) | requests during it (Leases) | reconcile errors | leadership | the new object copied after the end |\n")
	fmt.Fprint(w, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, o := range outcomes {
		c := countLines(between(o.lines, o.start, o.end))
		all, whole := o.requests("")
		leases, _ := o.requests("lease")
		reqs := fmt.Sprintf("%.0f (%.0f)", all, leases)
		if !whole {
			reqs = ">= " + reqs
		}
		end := o.final()
		errs := end.sum("controller_runtime_reconcile_total", `result="error"`) - o.atStart.sum("controller_runtime_reconcile_total", `result="error"`)
		lead := "kept"
		if !o.leadershipLost().IsZero() {
			lead = "lost"
		}
		if o.exitedDuring() {
			lead += fmt.Sprintf(", exited at %.1fs", o.exited.Sub(o.start).Seconds())
		}
		_, fresh, _, ok := o.recovery()
		rec := "never"
		if ok {
			rec = secs(fresh)
		}
		fmt.Fprintf(w, "| %s | %s | %v | %d (%d, %d) | %s | %.0f | %s | %s |\n",
			o.load(), o.policy(), o.outage, c.total(), c.zap, c.klog, reqs, errs, lead, rec)
	}
}

// verdicts returns what the runs missed.
func verdicts(outcomes []*outcome, le leaderTiming) []string {
	var missed []string
	for _, o := range outcomes {
		if o.outage < le.renew-le.retry && (!o.leadershipLost().IsZero() || o.exitedDuring()) {
			missed = append(missed, fmt.Sprintf("%v: lost its leadership through an outage shorter than the RenewDeadline less a RetryPeriod", o.spec))
		}
		if !o.budget {
			continue
		}
		starts, ends := 0, 0
		for _, l := range o.holdLines() {
			switch kind, _ := kindOf(l.text); kind {
			case holdStart:
				starts++
			case holdEnd:
				ends++
			}
		}
		if o.busy && starts == 0 {
			missed = append(missed, fmt.Sprintf("%v: no hold logged", o.spec))
		}
		if !o.exitedDuring() && starts != ends {
			missed = append(missed, fmt.Sprintf("%v: %d holds started, %d ended", o.spec, starts, ends))
		}
		if !o.busy {
			continue
		}
		for _, none := range outcomes {
			if none.budget || !none.busy || none.outage != o.outage {
				continue
			}
			ours, _ := o.requests("")
			theirs, whole := none.requests("")
			if whole && ours >= theirs {
				missed = append(missed, fmt.Sprintf("%v: %.0f requests during the outage, no budget %.0f", o.spec, ours, theirs))
			}
		}
	}
	return missed
}

// reconcilerError returns a "Reconciler error" line of lines, one whose
// error names a hold's probe when there is one.
func reconcilerError(lines []line) (line, bool) {
	var first line
	found := false
	for _, l := range lines {
		if kind, _ := kindOf(l.text); kind != "Reconciler error" {
			continue
		}
		if strings.Contains(l.text, "retry: probe of") {
			return l, true
		}
		if !found {
			first, found = l, true
		}
	}
	return first, found
}

// stacktrace matches zap's stacktrace field.
var stacktrace = regexp.MustCompile(`"stacktrace":"(?:[^"\\]|\\.)*"`)

// cutStacktrace replaces the value of a zap line's stacktrace with "...".
func cutStacktrace(text string) string {
	return stacktrace.ReplaceAllString(text, `"stacktrace":"..."`)
}

package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// madeUp returns a process's result: healthy from 1s, the outage from
// 4s to 9s, the end at 12s; configmaps requests before, during and after
// as given, probes during the outage, and one worker whose calls are
// calls (its ConfigMap holding keys).
func madeUp(before, during, after int, probes uint64, calls []outage.Call, keys ...string) *outage.Result {
	r := &outage.Result{Begin: t0, Sched: outage.Schedule{Workers: 1}, HasBudget: probes > 0}
	r.Bounds = [4]time.Duration{time.Second, 4 * time.Second, 9 * time.Second, 12 * time.Second}
	total := 0
	for i, n := range []int{0, before, during, after} {
		total += n
		r.Requests[i] = reqcount.Counts{{Verb: "update", Resource: "configmaps"}: total}
	}
	r.Budget[outage.After].Probes = probes
	r.Calls = calls
	data := map[string]string{"n": strconv.Itoa(len(keys))}
	for _, k := range keys {
		seq, _ := strconv.Atoi(strings.TrimPrefix(k, "c"))
		data[k] = strconv.Itoa(seq)
	}
	r.Data = []map[string]string{data}
	return r
}

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestComputeFigures checks a fleet's figures on two made-up processes:
// the requests and probes of the outage summed, the last worker back,
// a lost write found, the 429s counted by when they were answered (in the
// healthy phase before the outage, not in the warm-up; in the 2s after its
// end; later) and each request and 429
// in its second from the outage's start, a second before it included.
func TestComputeFigures(t *testing.T) {
	t.Parallel()
	sec := time.Second
	a := madeUp(30, 7, 40, 4, []outage.Call{
		{Worker: 0, Seq: 0, End: 2 * sec},
		{Worker: 0, Seq: 1, End: 9*sec + 300*time.Millisecond},
	}, "c00000", "c00001")
	b := madeUp(30, 5, 40, 3, []outage.Call{
		{Worker: 0, Seq: 0, End: 9*sec + 100*time.Millisecond, Err: errors.New("429")},
		{Worker: 0, Seq: 1, End: 10*sec + 200*time.Millisecond}, // its key is missing: lost
	}, "c00000")
	b.Data[0]["n"] = "1"
	requests := []reqcount.Request{
		{Start: at(0.5), End: at(0.6), Code: 429, RetryAfter: "1"}, // in the warm-up: no second
		{Start: at(3.5), End: at(3.6), Code: 429, RetryAfter: "1"}, // before: second -1
		{Start: at(4.0), End: at(4.0), Code: 0},                    // second 0
		{Start: at(9.0), End: at(9.1), Code: 429, RetryAfter: "2"}, // 2s after, second 5
		{Start: at(10.5), End: at(10.99), Code: 429, RetryAfter: "4"},
		{Start: at(10.9), End: at(11.0), Code: 429, RetryAfter: "x"}, // later: second 7
		{Start: at(11.5), End: at(11.6), Code: 200},
	}
	f := computeFigures([]*outage.Result{a, b}, requests)
	if f.OutageRequests != 12 || f.Probes != 7 {
		t.Errorf("outage requests %d, probes %d; want 12, 7", f.OutageRequests, f.Probes)
	}
	if !f.AllBack || f.Back != 1200*time.Millisecond {
		t.Errorf("back %v, %v; want 1.2s, true", f.Back, f.AllBack)
	}
	if f.Lost != 1 || len(f.Problems) != 1 || !strings.HasPrefix(f.Problems[0], "process 1: ") {
		t.Errorf("lost %d, problems %q; want 1 lost write of process 1", f.Lost, f.Problems)
	}
	if f.HealthyRate != 1.0/3 {
		t.Errorf("healthy rate %v requests a second, want 1/3 (one sent in the 3s from 1s to 4s)", f.HealthyRate)
	}
	if f.TooManyBefore != 1 || f.TooManyAfter != 2 || f.TooManyLater != 3 || f.MaxRetryAfter != 4 {
		t.Errorf("429s before %d, 2s after %d, after %d, max Retry-After %d; want 1, 2, 3, 4",
			f.TooManyBefore, f.TooManyAfter, f.TooManyLater, f.MaxRetryAfter)
	}
	var got []second
	for _, s := range f.Seconds {
		if s.Requests > 0 || s.TooMany > 0 {
			got = append(got, s)
		}
	}
	want := []second{{-1, 1, 1}, {0, 1, 0}, {5, 1, 1}, {6, 2, 1}, {7, 1, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("seconds with requests or 429s %v, want %v", got, want)
	}
	if first, last := f.Seconds[0].At, f.Seconds[len(f.Seconds)-1].At; first != -3 || last != 8 {
		t.Errorf("seconds from %d to %d, want -3 to 8", first, last)
	}
	if f := computeFigures(nil, requests); f.AllBack || len(f.Seconds) != 0 {
		t.Errorf("no process: %+v, want no figures", f)
	}
}

// fleetOf is a made-up fleet run with the figures given.
func fleetOf(pol policy, q int32, outageRequests, tooMany int, back time.Duration, problems ...string) *fleet {
	return &fleet{queueLength: q, run: 1, policy: pol, fig: figures{
		OutageRequests: outageRequests, TooManyAfter: tooMany, Back: back, AllBack: back >= 0, Problems: problems,
	}}
}

// TestVerdicts checks each target, met and missed, against the run
// without a budget of the same queue length and run.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	none, ours := policies[0], policies[len(policies)-1]
	other := policy{name: "other", budget: retry.NewBudget}
	for name, c := range map[string]struct {
		fleets []*fleet
		want   []string // substrings of the misses, one each
	}{
		"met": {fleets: []*fleet{
			fleetOf(none, 20, 1000, 100, 3*time.Second), fleetOf(ours, 20, 120, 25, 1500*time.Millisecond),
			fleetOf(none, 10, 1000, 0, time.Second), fleetOf(ours, 10, 100, 5, time.Second),
			fleetOf(other, 10, 1000, 100, -1), // not a policy with targets
			// 429s while healthy, but the fleet sent what it offers
			{queueLength: 20, run: 2, policy: none, offered: 384, fig: figures{OutageRequests: 1, AllBack: true, TooManyBefore: 30, HealthyRate: 346}},
		}},
		"missed": {fleets: []*fleet{
			fleetOf(none, 20, 1000, 100, 3*time.Second), fleetOf(ours, 20, 121, 26, 1501*time.Millisecond),
			fleetOf(none, 10, 0, 0, -1, "process 3: worker 1: call c00004 returned nil and its key is missing (a lost write)"),
			fleetOf(ours, 10, 0, 6, -1),
			{queueLength: 20, run: 2, policy: none, load: "9.50", offered: 384, fig: figures{OutageRequests: 1, AllBack: true, TooManyBefore: 30, HealthyRate: 345}},
		}, want: []string{
			"queue length 20, run 2, no budget: 345 requests a second in the healthy phase before the outage, 0.898x the 384 the fleet offers, want at least 0.90x: the server was saturated (load 9.50)",
			"queue length 20, run 1, NewBudget(): 121 requests during the outage, 0.121x",
			"queue length 20, run 1, NewBudget(): 26 429s",
			"queue length 20, run 1, NewBudget(): the last worker back 1.501s",
			"queue length 10, run 1, no budget: process 3: worker 1",
			"queue length 10, run 1, no budget: no request during the outage",
			"queue length 10, run 1, NewBudget(): 6 429s",
			"queue length 10, run 1, NewBudget(): a worker never came back",
		}},
		"no baseline": {fleets: []*fleet{fleetOf(ours, 20, 1, 0, 0)}, want: []string{"no run without a budget"}},
	} {
		got := verdicts(c.fleets)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d misses %q, want %d", name, len(got), got, len(c.want))
			continue
		}
		for _, w := range c.want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
				t.Errorf("%s: no miss says %q: %q", name, w, got)
			}
		}
	}
}

// TestSharesFor checks the shares that give the fleet's level its seats
// beside the suggested levels (245 shares) on the server's 600 seats.
func TestSharesFor(t *testing.T) {
	t.Parallel()
	if s, err := sharesFor(10, 600, 245); err != nil || s != 4 {
		t.Errorf("sharesFor(10, 600, 245) = %d, %v; want 4 (ceil(600 x 4 / 249) = 10)", s, err)
	}
	if _, err := sharesFor(700, 600, 245); err == nil || !strings.Contains(err.Error(), "700 seats") {
		t.Errorf("sharesFor(700, 600, 245): %v, want an error naming 700 seats", err)
	}
}

// TestMetricsSum checks the reading of the server's metrics.
func TestMetricsSum(t *testing.T) {
	t.Parallel()
	m := metrics(strings.Split(`# HELP apiserver_flowcontrol_rejected_requests_total x
apiserver_flowcontrol_rejected_requests_total{flow_schema="kuberetry-fleet",priority_level="a",reason="queue-full"} 7
apiserver_flowcontrol_rejected_requests_total{flow_schema="kuberetry-fleet",priority_level="a",reason="time-out"} 2
apiserver_flowcontrol_rejected_requests_total{flow_schema="other",priority_level="b",reason="queue-full"} 100
apiserver_flowcontrol_nominal_limit_seats{priority_level="a"} 10`, "\n"))
	for _, c := range []struct {
		kv   []string
		want float64
	}{
		{[]string{"priority_level", "a", "reason", "queue-full"}, 7},
		{[]string{"priority_level", "a"}, 9},
		{nil, 109},
		{[]string{"priority_level", "c"}, 0},
	} {
		if got := m.sum("apiserver_flowcontrol_rejected_requests_total", c.kv...); got != c.want {
			t.Errorf("sum of rejected %v = %v, want %v", c.kv, got, c.want)
		}
	}
	if got := m.sum("apiserver_flowcontrol_nominal_limit_seats", "priority_level", "a"); got != 10 {
		t.Errorf("nominal seats %v, want 10", got)
	}
}

// readCSV reads fleet-apiserver.csv in dir.
func readCSV(t *testing.T, dir string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "fleet-apiserver.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], csvHeader) {
		t.Fatalf("fleet-apiserver.csv's header %q, want %q", rows[0], csvHeader)
	}
	return rows[1:]
}

// TestQuick runs the command at --quick size on an in-process apiserver
// with APF and RBAC, into a temporary directory (the priority level it
// makes for each run is checked to be in effect before the run: the
// service account's requests classified into it, 10 seats). It checks the
// CSV: each policy's figures, a row per second for each, the requests of
// every second summing to more than the outage's; that no write was
// lost; and that each budget sent fewer requests during the outage than
// no budget. The targets are the full fleet's: a miss here is reported,
// not failed.
func TestQuick(t *testing.T) {
	dir := t.TempDir()
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"--quick", "--out", dir}, &out, cluster.NewProgress(&log))
	t.Logf("\n%s", out.String())
	if err != nil && !errors.Is(err, errMissed) {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if err != nil {
		t.Logf("at --quick size: %v", err)
	}
	figure := map[string]map[string]string{} // policy -> figure -> value
	seconds := map[string]int{}
	requests := map[string]int{}
	for _, r := range readCSV(t, dir) {
		pol, fig, sec, value := r[2], r[3], r[4], r[5]
		if figure[pol] == nil {
			figure[pol] = map[string]string{}
		}
		if sec == "" {
			figure[pol][fig] = value
			continue
		}
		if fig == figRequests {
			seconds[pol]++
			n, _ := strconv.Atoi(value)
			requests[pol] += n
		}
	}
	outageRequests := map[string]int{}
	for _, pol := range policies {
		figs := figure[pol.name]
		for _, fig := range []string{figHealthyRate, figOutageRequests, figTooManyAfter, figBack, figLost, figDispatched, figLoad} {
			if _, ok := figs[fig]; !ok {
				t.Errorf("%s: no %q in the CSV", pol.name, fig)
			}
		}
		if figs[figLost] != "0" {
			t.Errorf("%s: %s lost writes", pol.name, figs[figLost])
		}
		if want := int((quick.sched.Before + quick.sched.Outage + quick.sched.After) / time.Second); seconds[pol.name] < want {
			t.Errorf("%s: %d seconds of requests, want at least %d", pol.name, seconds[pol.name], want)
		}
		n, err := strconv.Atoi(figs[figOutageRequests])
		if err != nil || requests[pol.name] <= n {
			t.Errorf("%s: %d requests in all the seconds, %q in the outage: want more in all", pol.name, requests[pol.name], figs[figOutageRequests])
		}
		outageRequests[pol.name] = n
	}
	for _, pol := range policies[1:] {
		if none, ours := outageRequests[policies[0].name], outageRequests[pol.name]; ours >= none {
			t.Errorf("%s sent %d requests during the outage, no budget %d: want fewer", pol.name, ours, none)
		}
	}
}

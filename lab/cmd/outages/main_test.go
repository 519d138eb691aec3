package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/lab/internal/peers"
)

// fakeRun is a run whose figures are known: calls ending at the given
// times (seconds from the start), and requests to configmaps at each
// phase's bound.
func fakeRun(caller outage.Caller, policy string, requests [4]int, ends map[int][]float64) *outage.Result {
	r := &outage.Result{Caller: caller, Policy: policy, Sched: outage.Schedule{Workers: 2, Outage: 5 * time.Second}, HasBudget: policy == outage.Ours.Name}
	r.Bounds = [4]time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second, 16 * time.Second}
	for i, n := range requests {
		r.Requests[i] = reqcount.Counts{{Verb: "get", Resource: "configmaps"}: n}
	}
	for w, es := range ends {
		for seq, e := range es {
			r.Calls = append(r.Calls, outage.Call{Worker: w, Seq: seq, End: time.Duration(e * float64(time.Second))})
		}
	}
	return r
}

// TestOutput checks the CSV and the plot on runs made up so that every
// figure is known, and the verdicts on them.
func TestOutput(t *testing.T) {
	t.Parallel()
	// Worker 0 back 0.3s after the outage, worker 1 at 0.6s; ours 0.75s
	// after the 5s outage (met, at the edge); ours sends 4 requests in
	// the outage against 80: fewest.
	ends := func(last float64) map[int][]float64 {
		return map[int][]float64{0: {3, 4, 10.3, 11}, 1: {3.5, 10 + last}}
	}
	rs := []*outage.Result{
		fakeRun(outage.LoopQueue, outage.NoBudget.Name, [4]int{0, 100, 180, 300}, ends(0.6)),
		fakeRun(outage.LoopQueue, outage.Ours.Name, [4]int{0, 100, 104, 230}, ends(0.75)),
	}
	// The budget's Stats at the outage's end and at the run's end: 5
	// retries, 4 refusals (3 of them after the outage), 3 held, 2 probes.
	rs[1].Budget[outage.After] = retry.BudgetStats{Refused: 1}
	rs[1].Budget[3] = retry.BudgetStats{Retries: 5, Refused: 4, Held: 3, Probes: 2}
	dir := t.TempDir()
	csvPath, pngPath := filepath.Join(dir, "outages.csv"), filepath.Join(dir, "outages.png")
	if err := writeCSV(csvPath, rs); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		csvHeader,
		{"5.0", "a", "no budget", "80", "1.000", "0", "600", "1.00", "0.60", "0.600", "6", "0", "", "", "", "", ""},
		{"5.0", "a", "NewBudget()", "4", "0.050", "0", "750", "1.00", "0.60", "0.600", "6", "0", "5", "4", "3", "3", "2"},
	}
	if len(rows) != len(want) {
		t.Fatalf("CSV rows %v, want %v", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("CSV row %d: %v, want %v", i, rows[i], want[i])
		}
	}

	if err := drawPlot(pngPath, peers.All(), rs); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 400 {
		t.Errorf("plot %v, want at least 1000x400", b)
	}

	if _, err := parseBudget("0.1,1,3s"); err == nil {
		t.Error("parseBudget of 3 fields: no error")
	}
	if _, err := parseBudget("0.1,1,-3s,25ms"); err == nil || !strings.Contains(err.Error(), "Window") {
		t.Errorf("parseBudget of a negative Window: %v, want Validate's error naming Window", err)
	}
	if p, err := parseBudget("0.02,0,1s,200ms"); err != nil || p.Name != "Ratio 0.02, MinPerSecond 0, Window 1s, Hold 200ms" {
		t.Errorf("parseBudget: %q, %v", p.Name, err)
	}

	var out bytes.Buffer
	if missed := verdicts(&out, rs); len(missed) != 0 {
		t.Errorf("verdicts missed %v on runs that meet both targets:\n%s", missed, out.String())
	}
	// 0.2s later, ours is no longer back within 0.75s.
	rs[1] = fakeRun(outage.LoopQueue, outage.Ours.Name, [4]int{0, 100, 104, 230}, ends(0.95))
	if missed := verdicts(&out, rs); len(missed) != 1 || !strings.Contains(missed[0], "back") {
		t.Errorf("verdicts %v, want one: back too late", missed)
	}
}

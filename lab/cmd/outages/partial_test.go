package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/lab/internal/partial"
)

// fakePartial is a partial round's result: n healthy calls, the slowest
// taking slowest and the others 10ms, and failing requests to the group
// that is down.
func fakePartial(policy string, n int, slowest time.Duration, failing int) *partial.Result {
	r := &partial.Result{Policy: policy, Sched: partial.Workload, FailingRequests: failing, HasBudget: policy == outage.Ours.Name}
	for i := range n {
		d := 10 * time.Millisecond
		if i == 0 {
			d = slowest
		}
		r.Healthy = append(r.Healthy, d)
	}
	return r
}

// TestPartialOutput checks the partial round's CSV and its verdicts on
// results made up so that every figure is known: met at the targets'
// edges, each missed beyond them.
func TestPartialOutput(t *testing.T) {
	t.Parallel()
	base := fakePartial(outage.NoBudget.Name, 100, 10*time.Millisecond, 200)
	// 90 calls (0.9x), a p99 of 60ms (the base's 10ms + 50ms), 50
	// requests to the failing group (0.25x).
	ours := fakePartial(outage.Ours.Name, 90, 60*time.Millisecond, 50)
	ours.Budget = retry.BudgetStats{Retries: 1, Refused: 2, Held: 3, Probes: 4}
	rs := []*partial.Result{base, ours}

	path := filepath.Join(t.TempDir(), "outages-partial.csv")
	if err := writePartialCSV(path, rs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		partialHeader,
		{"no budget", "100", "20.0", "10.0", "10.0", "0", "200", "1.00", "", "", "", ""},
		{"NewBudget()", "90", "18.0", "10.0", "60.0", "0", "50", "0.25", "1", "2", "3", "4"},
	}
	if len(rows) != len(want) {
		t.Fatalf("CSV rows %v, want %v", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("CSV row %d: %v, want %v", i, rows[i], want[i])
		}
	}

	var out bytes.Buffer
	if missed := partialVerdicts(&out, rs); len(missed) != 0 {
		t.Errorf("missed %v at the targets' edges:\n%s", missed, out.String())
	}
	for _, tc := range []struct {
		name string
		ours *partial.Result
		want string
	}{
		{"fewer healthy calls", fakePartial(outage.Ours.Name, 89, 10*time.Millisecond, 50), "89 healthy calls"},
		{"a slower p99", fakePartial(outage.Ours.Name, 90, 61*time.Millisecond, 50), "healthy p99 61ms"},
		{"more requests to the failing group", fakePartial(outage.Ours.Name, 100, 10*time.Millisecond, 51), "51 requests to the failing group"},
	} {
		out.Reset()
		missed := partialVerdicts(&out, []*partial.Result{base, tc.ours})
		if len(missed) != 1 || !strings.Contains(missed[0], tc.want) {
			t.Errorf("%s: missed %v, want one with %q\n%s", tc.name, missed, tc.want, out.String())
		}
	}
	failed := fakePartial(outage.Ours.Name, 100, 10*time.Millisecond, 10)
	failed.HealthyFailed = 1
	if missed := partialVerdicts(&out, []*partial.Result{base, failed}); len(missed) != 1 || !strings.Contains(missed[0], "1 healthy calls failed") {
		t.Errorf("a healthy call failed: missed %v", missed)
	}
}

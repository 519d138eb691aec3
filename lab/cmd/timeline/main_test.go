package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry/lab/internal/cluster"
)

// TestCounts checks the bucketing of the wire's requests: by kind, from
// the start, the last bucket's end and what came before the start left
// out.
func TestCounts(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &wire{}
	for _, s := range []struct {
		ms   int
		what string
	}{{-1, configMaps}, {0, configMaps}, {99, configMaps}, {100, secretWrites}, {250, configMaps}, {299, configMaps}, {300, configMaps}} {
		w.sent = append(w.sent, sent{at: start.Add(time.Duration(s.ms) * time.Millisecond), what: s.what})
	}
	got := w.counts(start, 3)
	if want := []int{2, 0, 2}; !slices.Equal(got[configMaps], want) {
		t.Errorf("configmaps per bucket %v, want %v", got[configMaps], want)
	}
	if want := []int{0, 1, 0}; !slices.Equal(got[secretWrites], want) {
		t.Errorf("writes of secrets per bucket %v, want %v", got[secretWrites], want)
	}
	if n := w.between(configMaps, start, start.Add(250*time.Millisecond)); n != 2 {
		t.Errorf("configmaps in [0, 250ms): %d, want 2", n)
	}
}

// TestScopeName checks that no address of the machine reaches the files.
func TestScopeName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://127.0.0.1:41387": "https://HOST:PORT",
		"writes of secrets":       "writes of secrets",
	} {
		if got := scopeName(in); got != want {
			t.Errorf("scopeName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sanitize(`Put "https://127.0.0.1:41387/api/v1": read tcp 127.0.0.1:5000->127.0.0.1:41387: reset`); strings.Contains(got, "127.0.0.1") {
		t.Errorf("sanitize left an address: %q", got)
	}
}

// TestQuick runs the command as make timeline does, at --quick size, on
// an in-process apiserver, into a temporary directory, and checks the
// files it writes: the PNG, and the CSV's shape (a failure row per
// scenario, a row per bucket for each policy and kind of request, the
// holds of NewBudget() only), and that NewBudget() sent fewer requests
// to what failed during the failure than no budget did.
func TestQuick(t *testing.T) {
	dir := t.TempDir()
	var out, log bytes.Buffer
	if err := run(t.Context(), []string{"--quick", "--out", dir}, &out, cluster.NewProgress(&log)); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), log.String())
	}
	t.Logf("\n%s", out.String())

	f, err := os.Open(filepath.Join(dir, "budget-timeline.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("budget-timeline.png: %v", err)
	}

	f, err = os.Open(filepath.Join(dir, "budget-timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("CSV header %v, want %v", rows[:min(len(rows), 1)], csvHeader)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	num := func(row []string, name string) float64 {
		v, err := strconv.ParseFloat(row[col[name]], 64)
		if err != nil {
			t.Fatalf("row %v: %s: %v", row, name, err)
		}
		return v
	}
	type key struct{ scenario, policy, what string }
	failures := map[string][2]float64{}
	buckets := map[key][]float64{} // the buckets' starts, in order
	during := map[key]int{}        // requests in the buckets within the failure
	holds := map[string][]string{} // scenario: the scopes held
	for _, row := range rows[1:] {
		sc := row[col["scenario"]]
		switch kind := row[col["kind"]]; kind {
		case "failure":
			failures[sc] = [2]float64{num(row, "start_s"), num(row, "end_s")}
		case "hold":
			if p := row[col["policy"]]; p != withBudget {
				t.Errorf("a hold of %s: %v", p, row)
			}
			holds[sc] = append(holds[sc], row[col["what"]])
		case "requests":
			k := key{sc, row[col["policy"]], row[col["what"]]}
			start, end := num(row, "start_s"), num(row, "end_s")
			buckets[k] = append(buckets[k], start)
			if f, ok := failures[sc]; ok && start >= f[0] && end <= f[1] {
				during[k] += int(num(row, "requests"))
			}
		default:
			t.Errorf("a row of kind %q: %v", kind, row)
		}
	}
	for _, sc := range []string{"outage", "webhook"} {
		if _, ok := failures[sc]; !ok {
			t.Errorf("%s: no failure row", sc)
		}
	}
	length := map[string]time.Duration{"outage": quick.outage, "webhook": quick.webhook}
	for k, starts := range buckets {
		wantBuckets := int((quick.before + length[k.scenario] + quick.after) / bucket)
		if len(starts) < wantBuckets-2 || len(starts) > wantBuckets+2 {
			t.Errorf("%v: %d buckets, want about %d", k, len(starts), wantBuckets)
		}
		for i, s := range starts {
			if want := float64(i) * bucket.Seconds(); s < want-1e-9 || s > want+1e-9 {
				t.Errorf("%v: bucket %d starts at %v, want %v", k, i, s, want)
				break
			}
		}
	}
	for _, k := range []key{{"outage", noBudget, configMaps}, {"outage", withBudget, configMaps},
		{"webhook", noBudget, secretWrites}, {"webhook", withBudget, secretWrites},
		{"webhook", noBudget, configMaps}, {"webhook", withBudget, configMaps}} {
		if buckets[k] == nil {
			t.Errorf("no rows of %v", k)
		}
	}
	// The failure's requests: a wide margin (the outage's are about 40
	// to 1), so no machine's load makes it fail.
	for _, k := range []key{{"outage", "", configMaps}, {"webhook", "", secretWrites}} {
		none, ours := during[key{k.scenario, noBudget, k.what}], during[key{k.scenario, withBudget, k.what}]
		if ours >= none {
			t.Errorf("%s: NewBudget() sent %d %s requests during the failure, no budget %d: want fewer", k.scenario, ours, k.what, none)
		}
	}
	if holdsReported {
		for _, sc := range []string{"outage", "webhook"} {
			if len(holds[sc]) == 0 {
				t.Errorf("%s: no hold in the CSV", sc)
			}
		}
		for _, s := range holds["webhook"] {
			if s != secretWrites {
				t.Errorf("webhook: a hold of %q, want %q only", s, secretWrites)
			}
		}
	}
}

package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kuberetry/retry/lab/internal/cluster"
)

// TestAPIServersUsage checks that --apiservers beside --kubeconfig is a
// usage error that starts nothing and writes no file (contention's
// TestClusterFlags checks the rest).
func TestAPIServersUsage(t *testing.T) {
	dir := t.TempDir()
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"--apiservers=2", "--kubeconfig=some-file", "--out", dir}, "", &out, cluster.NewProgress(&log))
	if err == nil || !strings.Contains(err.Error(), "--apiservers") {
		t.Errorf("--apiservers=2 --kubeconfig=some-file: %v, want an error naming --apiservers", err)
	}
	if entries, _ := os.ReadDir(dir); log.Len() > 0 || out.Len() > 0 || len(entries) > 0 {
		t.Errorf("wrote %q, %q and %d files, want nothing started", out.String(), log.String(), len(entries))
	}
}

// TestQuick runs the study as make study does, at --quick size, into a
// temporary directory, and checks the CSV and the plots it writes.
func TestQuick(t *testing.T) {
	dir := t.TempDir()
	var out, log bytes.Buffer
	if err := run(t.Context(), []string{"--quick", "--out", dir}, "", &out, cluster.NewProgress(&log)); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("\n%s", out.String())

	f, err := os.Open(filepath.Join(dir, "study.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("CSV header %v, want %v", rows, csvHeader)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	// Every sweep point once per repetition; the search's raised
	// DefaultBackoff at least once per repetition, at its own writer count.
	sweep := map[string]int{}
	search := 0
	for _, r := range rows[1:] {
		num := func(name string) float64 {
			x, err := strconv.ParseFloat(r[col[name]], 64)
			if err != nil {
				t.Fatalf("row %v: %s %q: %v", r, name, r[col[name]], err)
			}
			return x
		}
		writers, per := num("writers"), num("updates_per_writer")
		if num("attempted") != writers*per {
			t.Errorf("row %v: attempted %v, want writers x updates %v", r, num("attempted"), writers*per)
		}
		if num("succeeded")+num("gave_up") != num("attempted") {
			t.Errorf("row %v: succeeded + gave up != attempted", r)
		}
		// The idiom sends a GET and a PUT per attempt, UpdateOnConflict
		// at least the PUT: never fewer requests than successes.
		if num("succeeded") > 0 && num("requests_per_success") < 1 {
			t.Errorf("row %v: fewer requests than successful updates", r)
		}
		if num("p50_ms") > num("p99_ms") || num("p99_ms") > num("wall_ms") {
			t.Errorf("row %v: want p50 <= p99 <= wall", r)
		}
		raised := strings.HasPrefix(r[col["strategy"]], "client-go DefaultBackoff, Steps ")
		if raised && int(writers) == quick.searchWriters {
			search++
		}
		switch r[col["phase"]] {
		case "sweep":
			sweep[r[col["strategy"]]+"/"+r[col["writers"]]]++
		case "search":
			if !raised || int(writers) != quick.searchWriters {
				t.Errorf("search row %v, want the raised DefaultBackoff at %d writers", r, quick.searchWriters)
			}
		default:
			t.Errorf("row %v: phase %q", r, r[col["phase"]])
		}
	}
	if search < quick.reps {
		t.Errorf("%d search rows, want at least %d", search, quick.reps)
	}
	names := map[string]bool{}
	for k, n := range sweep {
		names[k[:strings.LastIndex(k, "/")]] = true
		if n != quick.reps {
			t.Errorf("%s: %d runs, want %d", k, n, quick.reps)
		}
	}
	if want := len(strategies(4)) * len(quick.writers); len(sweep) != want || len(names) != len(strategies(4)) {
		t.Errorf("%d sweep points of %d strategies, want %d of %d: %v", len(sweep), len(names), want, len(strategies(4)), sweep)
	}

	for _, c := range charts {
		f, err := os.Open(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
			t.Errorf("%s is %v, too small to read", c.file, b)
		}
	}
	if !strings.Contains(log.String(), "deleted namespace") {
		t.Errorf("no cleanup reported:\n%s", log.String())
	}
}

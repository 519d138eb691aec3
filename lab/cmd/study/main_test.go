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

// TestFlags checks that a bad --strategies, --forms or --writers is a
// usage error naming the flag and the value, that starts nothing and
// writes no file.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--strategies", "AWS full jitter,no such"},
		{"--forms", "Patch"},
		{"--writers", "2,0"},
		{"--reps", "-1"},
	} {
		dir := t.TempDir()
		var out, log bytes.Buffer
		err := run(t.Context(), append(args, "--out", dir), "", &out, cluster.NewProgress(&log))
		bad := args[1][strings.LastIndex(args[1], ",")+1:]
		if err == nil || !strings.Contains(err.Error(), args[0]) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%v: %v, want an error naming %s and %q", args, err, args[0], bad)
		}
		if entries, _ := os.ReadDir(dir); log.Len() > 0 || out.Len() > 0 || len(entries) > 0 {
			t.Errorf("%v: wrote %q, %q and %d files, want nothing started", args, out.String(), log.String(), len(entries))
		}
	}
}

// TestQuick runs the study as make study does, at --quick size, into a
// temporary directory, and checks the CSV, the verdict table and the
// plots it writes. Its verdict is not checked: at 2 updates per writer
// the medians say nothing.
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
	// Every point once per repetition, each strategy in each form.
	points := map[string]int{}
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
		// The idiom sends a GET and a PUT per attempt, Update at least
		// the PUT: never fewer requests than successes.
		if num("succeeded") > 0 && num("requests_per_success") < 1 {
			t.Errorf("row %v: fewer requests than successful updates", r)
		}
		if num("p50_ms") > num("p99_ms") || num("p99_ms") > num("wall_ms") {
			t.Errorf("row %v: want p50 <= p99 <= wall", r)
		}
		if !slices.Contains(forms, r[col["form"]]) || !slices.Contains(names, r[col["strategy"]]) {
			t.Errorf("row %v: unknown form or strategy", r)
		}
		points[r[col["form"]]+"/"+r[col["strategy"]]+"/"+r[col["writers"]]]++
	}
	for k, n := range points {
		if n != quick.reps {
			t.Errorf("%s: %d runs, want %d", k, n, quick.reps)
		}
	}
	if want := len(names) * len(forms) * len(quick.writers); len(points) != want {
		t.Errorf("%d points, want %d: %v", len(points), want, points)
	}
	if !strings.Contains(out.String(), "best peer") {
		t.Errorf("no verdict table printed:\n%s", out.String())
	}

	for _, prefix := range []string{"study-", "study-idiom-"} {
		for _, c := range charts {
			f, err := os.Open(filepath.Join(dir, prefix+c.file))
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
	}
	if !strings.Contains(log.String(), "deleted namespace") {
		t.Errorf("no cleanup reported:\n%s", log.String())
	}
}

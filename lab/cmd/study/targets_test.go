package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry/integration/testenv/contention"
)

// rec is a sweep record of strategy at writers: 100 successes for
// requests requests, and p99.
func rec(strategy string, writers, requests int, p99 time.Duration) record {
	return record{Phase: "sweep", Summary: contention.Summary{
		Strategy: strategy, Writers: writers, Updates: 100, Succeeded: 100, Requests: requests, P99: p99,
	}}
}

// TestCheckTargets holds the study's verdict to the figures: the medians
// of the repetitions against hotTargets, met at the study's own figures,
// missed beyond them, and nothing checked without 16 or 64 writers.
func TestCheckTargets(t *testing.T) {
	t.Parallel()
	study := []record{
		// 16 writers: 0.51x the requests, p99 2x (medians of three).
		rec(nameHotObject, 16, 300, 800*time.Millisecond), rec(nameHotObject, 16, 290, 760*time.Millisecond), rec(nameHotObject, 16, 310, 5*time.Second),
		rec(nameReadme, 16, 590, 380*time.Millisecond), rec(nameReadme, 16, 580, 100*time.Millisecond), rec(nameReadme, 16, 600, 400*time.Millisecond),
		// 64 writers: 0.31x the requests, p99 0.58x.
		rec(nameHotObject, 64, 296, 1460*time.Millisecond), rec(nameReadme, 64, 950, 2500*time.Millisecond),
	}
	var out bytes.Buffer
	if missed := checkTargets(&out, study); len(missed) > 0 || strings.Count(out.String(), ": met") != 4 {
		t.Errorf("the study's figures: missed %v\n%s", missed, out.String())
	}

	slower := append(study[:len(study):len(study)], // two more repetitions at 64 writers, the hot one's p99 3s
		rec(nameHotObject, 64, 300, 3*time.Second), rec(nameHotObject, 64, 300, 3*time.Second),
		rec(nameReadme, 64, 950, 2500*time.Millisecond), rec(nameReadme, 64, 950, 2500*time.Millisecond))
	out.Reset()
	missed := checkTargets(&out, slower)
	if len(missed) != 1 || !strings.Contains(missed[0], "64 writers: median p99 ms 1.20x") {
		t.Errorf("a p99 above the README's at 64 writers: missed %v, want the p99 at 64 writers\n%s", missed, out.String())
	}

	out.Reset()
	quick := []record{rec(nameHotObject, 4, 200, time.Second), rec(nameReadme, 4, 100, time.Millisecond)}
	if missed := checkTargets(&out, quick); len(missed) > 0 || !strings.Contains(out.String(), "not checked") {
		t.Errorf("without 16 or 64 writers: missed %v, printed %q; want nothing checked, said so", missed, out.String())
	}
}

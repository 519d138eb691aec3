package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry/integration/testenv/contention"
)

// rec is a record of strategy in form at writers: succeeded of 100
// updates, for requests requests, and p99.
func rec(strategy, form string, writers, succeeded, requests int, p99 time.Duration) record {
	return record{Name: strategy, Form: form, Summary: contention.Summary{
		Writers: writers, Updates: 100, Succeeded: succeeded, Requests: requests, P99: p99,
	}}
}

// TestCheckTargets holds the study's verdict to the target: against the
// best peer of those that got 99% through (lowest median p99), p99 within
// 1.5x or 20ms and requests within 1.25x, every update through; misses of
// the Update form fail, the idiom's are reported only.
func TestCheckTargets(t *testing.T) {
	t.Parallel()
	base := []record{
		// The lowest p99 of all, but 90% through: not the best.
		rec(nameClientGoRetry, formUpdate, 64, 90, 500, 300*time.Millisecond),
		// The best: 100 through, p99 1s, 3 requests per update.
		rec(nameFullJitter, formUpdate, 64, 100, 300, time.Second),
		rec(nameCenkalti, formUpdate, 64, 100, 150, 3*time.Second),
		rec(nameHot, formUpdate, 64, 100, 900, 5*time.Second),
		// At 2 writers the best's p99 is 10ms: 25ms is within 20ms of it.
		rec(nameFullJitter, formUpdate, 2, 100, 120, 10*time.Millisecond),
		rec(nameHot, formUpdate, 2, 100, 120, 10*time.Millisecond),
	}
	for _, tc := range []struct {
		name string
		hot  []record // HotObjectBackoff + Contention's
		more []record
		want []string // substrings of the misses, in order
	}{
		{name: "met", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 370, 1490*time.Millisecond),
			rec(nameHotContention, formUpdate, 2, 100, 140, 29*time.Millisecond),
		}},
		{name: "p99 over 1.5x", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 300, 1600*time.Millisecond),
			rec(nameHotContention, formUpdate, 2, 100, 120, 31*time.Millisecond),
		}, want: []string{"Update at 2 writers: HotObjectBackoff + Contention's p99 31.0ms", "Update at 64 writers: HotObjectBackoff + Contention's p99 1600.0ms is 1.60x AWS full jitter's"}},
		{name: "requests over 1.25x", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 380, time.Second),
			rec(nameHotContention, formUpdate, 2, 100, 120, 10*time.Millisecond),
		}, want: []string{"Update at 64 writers: HotObjectBackoff + Contention's requests per update 3.80 are 1.27x AWS full jitter's 3.00"}},
		{name: "one repetition short", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 300, time.Second),
			rec(nameHotContention, formUpdate, 64, 99, 300, time.Second),
			rec(nameHotContention, formUpdate, 64, 100, 300, time.Second),
			rec(nameHotContention, formUpdate, 2, 100, 120, 10*time.Millisecond),
		}, want: []string{"Update at 64 writers: HotObjectBackoff + Contention did not get every update through"}},
		{name: "alone short", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 300, time.Second),
			rec(nameHotContention, formUpdate, 2, 100, 120, 10*time.Millisecond),
		}, more: []record{rec(nameHot, formUpdate, 2, 98, 120, 10*time.Millisecond)},
			want: []string{"Update at 2 writers: HotObjectBackoff alone did not get every update through"}},
		{name: "idiom reported only", hot: []record{
			rec(nameHotContention, formUpdate, 64, 100, 300, time.Second),
			rec(nameHotContention, formUpdate, 2, 100, 120, 10*time.Millisecond),
			rec(nameFullJitter, formIdiom, 64, 100, 300, time.Second),
			rec(nameHotContention, formIdiom, 64, 100, 600, 3*time.Second),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := append(append(append([]record{}, base...), tc.hot...), tc.more...)
			var out bytes.Buffer
			missed := checkTargets(&out, rs)
			if len(missed) != len(tc.want) {
				t.Fatalf("missed %q, want %d misses %q\n%s", missed, len(tc.want), tc.want, out.String())
			}
			for i, w := range tc.want {
				if !strings.Contains(missed[i], w) {
					t.Errorf("miss %d is %q, want it to contain %q", i, missed[i], w)
				}
			}
			if tc.name == "idiom reported only" && !strings.Contains(out.String(), "missed (reported only)") {
				t.Errorf("the idiom's miss is not reported:\n%s", out.String())
			}
		})
	}
}

package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// TestHotObjectBackoff holds the backoff that the contention study chose
// for a hot object to what the study found, against the README's earlier
// recommendation in the same run, at 16 and 64 writers incrementing one
// ConfigMap 10 times each (client-go's idiom: a GET and a PUT inside
// RetryOnConflictWithContext), each point 3 times, interleaved:
//   - HotObjectBackoff gets at least 99% of the updates through in every
//     repetition;
//   - its median requests per successful update (counted on the wire)
//     are at most 0.7x the README's at 64 writers and 0.8x at 16 (the
//     study: 0.31x and 0.51x).
//
// The p99 against the README's (the study: 0.58x at 64 writers, 1.98x at
// 16) is reported, not asserted: a wall-clock ratio that the other
// integration packages running beside it on a shared machine move (3.09x
// in one CI run). make study asserts it (hotTargets in lab/cmd/study).
func TestHotObjectBackoff(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "hotobject-")
	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}

	readme := retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0, Cap: 2 * time.Second}
	hot := contention.Idiom("HotObjectBackoff", retry.HotObjectBackoff)
	strategies := []contention.Strategy{hot, contention.Idiom("README", readme)}
	type point struct {
		strategy string
		writers  int
	}
	const updates = 10
	sums := map[point][]contention.Summary{}
	runs := 0
	for rep := range 3 {
		for _, writers := range []int{16, 64} {
			for i := range strategies {
				st := strategies[(i+rep)%len(strategies)] // alternate which runs first
				res, err := contention.Run(t.Context(), st, contention.Config{
					Client:    client,
					Namespace: ns,
					Name:      fmt.Sprintf("counter-%d", runs),
					Writers:   writers,
					Updates:   updates,
					Requests:  &wire,
				})
				runs++
				if err != nil {
					t.Fatal(err)
				}
				sum := contention.Summarize(res)
				checkContention(t, res, sum, writers*updates, st.Steps)
				p := point{st.Name, writers}
				sums[p] = append(sums[p], sum)
			}
		}
	}

	var b strings.Builder
	medians := func(p point) (reqs, p99 float64) {
		var rs, ps []float64
		for _, s := range sums[p] {
			rs = append(rs, s.RequestsPerUpdate())
			ps = append(ps, float64(s.P99))
			fmt.Fprintf(&b, "%-16s %2d writers: %3d/%3d succeeded, %5.2f requests per success, p99 %v\n",
				p.strategy, p.writers, s.Succeeded, s.Updates, s.RequestsPerUpdate(), s.P99.Round(time.Millisecond))
		}
		return contention.Median(rs), contention.Median(ps)
	}
	// The study's medians: at 64 writers 0.31x the requests, at 16 0.51x.
	for _, tc := range []struct {
		writers int
		maxReqs float64
	}{
		{16, 0.8},
		{64, 0.7},
	} {
		for _, s := range sums[point{hot.Name, tc.writers}] {
			if s.SuccessRate() < 0.99 {
				t.Errorf("%d writers: HotObjectBackoff got %d of %d updates through, want at least 99%%", tc.writers, s.Succeeded, s.Updates)
			}
		}
		hotReqs, hotP99 := medians(point{hot.Name, tc.writers})
		readmeReqs, readmeP99 := medians(point{"README", tc.writers})
		t.Logf("%d writers: requests per success %.2f against %.2f (%.2fx), p99 %v against %v (%.2fx; reported only, make study asserts it)",
			tc.writers, hotReqs, readmeReqs, hotReqs/readmeReqs, time.Duration(hotP99).Round(time.Millisecond),
			time.Duration(readmeP99).Round(time.Millisecond), hotP99/readmeP99)
		if r := hotReqs / readmeReqs; !(r <= tc.maxReqs) {
			t.Errorf("%d writers: median requests per success %.2f is %.2fx the README's %.2f, want at most %.2fx",
				tc.writers, hotReqs, r, readmeReqs, tc.maxReqs)
		}
	}
	t.Logf("each run:\n%s", b.String())
}

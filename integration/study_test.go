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
//   - at 64 writers its median requests per successful update (counted on
//     the wire) and its median p99 are both lower than the README's;
//   - at 16 writers it sends fewer requests too, and its p99, which the
//     study found higher there (a conflict costs at least 200ms), stays
//     within 5 times the README's.
//
// The bounds are ratios, loose against the study's figures, because the
// machine is shared: at 16 writers the README's p99 is a few hundred
// milliseconds, and with the other integration packages running beside
// it the ratio the study measured at 1.98x reached 3.09x in one CI run.
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
	type bounds struct{ reqs, p99 float64 }
	// The study's medians: at 64 writers 0.31x the requests and 0.58x the
	// p99; at 16, 0.51x and 1.98x.
	for _, tc := range []struct {
		writers int
		max     bounds
	}{
		{16, bounds{reqs: 0.8, p99: 5}},
		{64, bounds{reqs: 0.7, p99: 1}}, // lower is the claim
	} {
		for _, s := range sums[point{hot.Name, tc.writers}] {
			if s.SuccessRate() < 0.99 {
				t.Errorf("%d writers: HotObjectBackoff got %d of %d updates through, want at least 99%%", tc.writers, s.Succeeded, s.Updates)
			}
		}
		hotReqs, hotP99 := medians(point{hot.Name, tc.writers})
		readmeReqs, readmeP99 := medians(point{"README", tc.writers})
		t.Logf("%d writers: requests per success %.2f against %.2f (%.2fx), p99 %v against %v (%.2fx)", tc.writers,
			hotReqs, readmeReqs, hotReqs/readmeReqs, time.Duration(hotP99).Round(time.Millisecond),
			time.Duration(readmeP99).Round(time.Millisecond), hotP99/readmeP99)
		if r := hotReqs / readmeReqs; !(r <= tc.max.reqs) {
			t.Errorf("%d writers: median requests per success %.2f is %.2fx the README's %.2f, want at most %.2fx",
				tc.writers, hotReqs, r, readmeReqs, tc.max.reqs)
		}
		if r := hotP99 / readmeP99; !(r <= tc.max.p99) {
			t.Errorf("%d writers: median p99 %v is %.2fx the README's %v, want at most %.2fx", tc.writers,
				time.Duration(hotP99), r, time.Duration(readmeP99), tc.max.p99)
		}
	}
	t.Logf("each run:\n%s", b.String())
}

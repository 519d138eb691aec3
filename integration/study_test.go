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

// TestHotObjectBackoff holds the backoff the contention study chose for a
// hot object to what the contract promises of it and a loaded machine
// cannot break: through retry.Update, at 16 and 64 writers incrementing
// one ConfigMap 10 times each, 2 repetitions, HotObjectBackoff alone and
// with each writer's own Contention get every update through. Their p99
// and requests per update against AWS full jitter in the same run are
// reported, not asserted: wall-clock figures that the other integration
// packages running beside it on a shared machine move. make study asserts
// the target against every peer (lab/cmd/study).
func TestHotObjectBackoff(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "hotobject-")
	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}

	typed := func(name string, b retry.Backoff, opts func() []retry.Option) contention.Strategy {
		return contention.Strategy{Name: name, Steps: b.Steps, ForWriter: func(int) contention.Strategy {
			o := opts() // the writer's own: a Contention of its own
			return contention.Strategy{Update: contention.Typed(b, func() []retry.Option { return o })}
		}}
	}
	none := func() []retry.Option { return nil }
	fullJitter := retry.Backoff{Steps: 30, Duration: 5 * time.Millisecond, Factor: 2, Cap: time.Second}
	strategies := []contention.Strategy{
		typed("HotObjectBackoff", retry.HotObjectBackoff, none),
		typed("HotObjectBackoff + Contention", retry.HotObjectBackoff, func() []retry.Option {
			return []retry.Option{retry.WithContention(retry.NewContention())}
		}),
		typed("AWS full jitter", fullJitter, func() []retry.Option {
			return []retry.Option{retry.WithContinueAtCap(), retry.WithFullJitter()}
		}),
	}
	type point struct {
		strategy string
		writers  int
	}
	const updates = 10
	sums := map[point][]contention.Summary{}
	runs := 0
	for rep := range 2 {
		for _, writers := range []int{16, 64} {
			for i := range strategies {
				st := strategies[(i+rep)%len(strategies)] // rotate which runs first
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
				if st.Name != "AWS full jitter" && sum.Succeeded != sum.Updates {
					t.Errorf("%d writers: %s got %d of %d updates through, want every one", writers, st.Name, sum.Succeeded, sum.Updates)
				}
			}
		}
	}

	var b strings.Builder
	medians := func(p point) (reqs, p99 float64) {
		var rs, ps []float64
		for _, s := range sums[p] {
			rs = append(rs, s.RequestsPerUpdate())
			ps = append(ps, float64(s.P99))
			fmt.Fprintf(&b, "%-30s %2d writers: %3d/%3d succeeded, %5.2f requests per success, p99 %v\n",
				p.strategy, p.writers, s.Succeeded, s.Updates, s.RequestsPerUpdate(), s.P99.Round(time.Millisecond))
		}
		return contention.Median(rs), contention.Median(ps)
	}
	for _, writers := range []int{16, 64} {
		peerReqs, peerP99 := medians(point{"AWS full jitter", writers})
		for _, name := range []string{"HotObjectBackoff", "HotObjectBackoff + Contention"} {
			reqs, p99 := medians(point{name, writers})
			t.Logf("%d writers: %s: requests per update %.2f against full jitter's %.2f (%.2fx), p99 %v against %v (%.2fx); reported only, make study asserts the target",
				writers, name, reqs, peerReqs, reqs/peerReqs, time.Duration(p99).Round(time.Millisecond),
				time.Duration(peerP99).Round(time.Millisecond), p99/peerP99)
		}
	}
	t.Logf("each run:\n%s", b.String())
}

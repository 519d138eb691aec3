package apfsim

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kuberetry/retry"
)

// downUntil answers every request with a reset connection until back,
// then 200, and records when each budget's requests arrived.
type downUntil struct {
	back time.Time
	mu   sync.Mutex
	sent map[string][]time.Time // by the request's host: one per budget
}

func (d *downUntil) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	d.mu.Lock()
	d.sent[req.URL.Host] = append(d.sent[req.URL.Host], now)
	d.mu.Unlock()
	if now.Before(d.back) {
		return nil, resetError()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// spread runs n budgets, NewBudget() each with rnd as its Rand (nil: the
// default), whose holds start at the same instant, against a server down
// for down: each budget's one caller writes again at once after each
// failure. It returns, for each budget, when its requests arrived, from
// the holds' start.
func spread(t *testing.T, n int, rnd func() float64, down time.Duration) [][]time.Duration {
	t.Helper()
	var out [][]time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &downUntil{back: start.Add(down), sent: map[string][]time.Time{}}
		var wg sync.WaitGroup
		for i := range n {
			b := retry.NewBudget()
			b.Rand = rnd
			rt := b.WrapTransport(srv)
			url := "https://budget-" + strconv.Itoa(i) + "/api/v1/namespaces/ns/configmaps/cm"
			put := func() error {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, http.NoBody)
				if err != nil {
					return err
				}
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			// Three failed first attempts at the same instant start the hold.
			for range 3 {
				if put() == nil {
					t.Fatal("a write succeeded while the server was down")
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for put() != nil {
				}
			}()
		}
		wg.Wait()
		for i := range n {
			var ts []time.Duration
			for _, at := range srv.sent["budget-"+strconv.Itoa(i)] {
				ts = append(ts, at.Sub(start))
			}
			out = append(out, ts)
		}
	})
	return out
}

// crowd returns the most of ts within any window of w.
func crowd(ts []time.Duration, w time.Duration) int {
	ts = slices.Sorted(slices.Values(ts))
	most := 0
	for i, j := 0, 0; j < len(ts); j++ {
		for ts[j]-ts[i] >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// TestHoldsProbeApart starts the holds of 1,000 budgets at the same
// instant, against a server down for 2s, and measures how far apart their
// probes go: the most of their first probes within any 5ms (a tenth of
// the span, Hold/2 to Hold, they are drawn from: 100 expected), and the
// most of their releases (each budget's first success) within any 10ms.
// By then each budget waits 0.25s to 0.5s between probes, 0.375s on
// average, so at most 1,000 x 10ms / 0.375s, 27, of its next probes are
// expected in any 10ms after the server's return. The test allows twice
// each. With Rand fixed, every budget probes and is released at the same
// instant, which the same measure shows.
func TestHoldsProbeApart(t *testing.T) {
	const n, down = 1000, 2 * time.Second
	measure := func(sent [][]time.Duration) (first, release []time.Duration) {
		for i, ts := range sent {
			if len(ts) < 5 {
				t.Fatalf("budget %d sent %d requests, want the 3 that start its hold, probes, and the write that succeeds", i, len(ts))
			}
			first, release = append(first, ts[3]), append(release, ts[len(ts)-1])
		}
		return first, release
	}
	first, release := measure(spread(t, n, nil, down))
	hold := retry.NewBudget().Hold
	for i, at := range first {
		if at < hold/2 || at > hold {
			t.Errorf("budget %d's first probe went at %v, want within %v to %v", i, at, hold/2, hold)
		}
	}
	for i, at := range release {
		if at < down || at > down+500*time.Millisecond {
			t.Errorf("budget %d was released at %v, want within 0.5s (the longest interval) of the server's return at %v", i, at, down)
		}
	}
	if c := crowd(first, 5*time.Millisecond); c > 200 {
		t.Errorf("%d of %d first probes within 5ms, want at most 200 (100 expected)", c, n)
	}
	if c := crowd(release, 10*time.Millisecond); c > 54 {
		t.Errorf("%d of %d releases within 10ms, want at most 54 (27 expected)", c, n)
	}

	fixed := func() float64 { return 0.999999 }
	first, release = measure(spread(t, n, fixed, down))
	if c, r := crowd(first, time.Millisecond), crowd(release, 10*time.Millisecond); c != n || r != n {
		t.Errorf("with Rand fixed: %d first probes within 1ms and %d releases within 10ms, want all %d: the measure cannot tell", c, r, n)
	}
}

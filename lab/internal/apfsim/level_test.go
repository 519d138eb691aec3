package apfsim

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

func get(t *testing.T, l *Level, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://apiserver/api/v1/namespaces/ns/configmaps/cm", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Impersonate-User", "agent")
	return l.RoundTrip(req)
}

// TestLevelRejects fills a level of 2 seats and a hand of 2 queues of 3:
// the 9th request at once is answered 429 with kube-apiserver's
// Retry-After, 1 at first, 2 once the level dropped 3 requests in a
// second and dropped again a second later; every other request is
// answered, none waiting longer than the queues ahead of it.
func TestLevelRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := LevelConfig{Name: "l", Seats: 2, Queues: 8, HandSize: 2, QueueLengthLimit: 3,
			GetExec: 10 * time.Millisecond, PutExec: 10 * time.Millisecond, ResetDelay: time.Millisecond}
		l, err := NewLevel(cfg, NewStats(100*time.Millisecond, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		burst := func(n int) (codes map[int]int, retryAfter []string) {
			codes = map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					resp, err := get(t, l, t.Context())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					codes[resp.StatusCode]++
					if resp.StatusCode == http.StatusTooManyRequests {
						retryAfter = append(retryAfter, resp.Header.Get("Retry-After"))
					}
				})
				synctest.Wait() // in order: each queued or executing before the next
			}
			wg.Wait()
			return codes, retryAfter
		}
		codes, ra := burst(2 + 2*3 + 4) // seats, queues, then 4 too many
		if codes[http.StatusOK] != 8 || codes[http.StatusTooManyRequests] != 4 {
			t.Fatalf("answers %v, want 8 OK and 4 429", codes)
		}
		for _, v := range ra {
			if v != "1" {
				t.Errorf("Retry-After %q in the first second, want 1", v)
			}
		}
		if w := l.stats.MaxWait(); w < 20*time.Millisecond || w > 50*time.Millisecond {
			t.Errorf("longest wait in a queue %v, want 3 requests ahead of 2 seats: 20ms to 50ms (executions of 5ms to 15ms)", w)
		}
		time.Sleep(time.Second)
		_, ra = burst(2 + 2*3 + 1)
		if len(ra) != 1 || ra[0] != strconv.Itoa(2) {
			t.Errorf("Retry-After %v after 4 drops in the previous second, want [2]", ra)
		}
	})
}

// TestLevelOutage resets a request queued when the level goes down, and
// every request while it is down; after, it answers again.
func TestLevelOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := LevelConfig{Name: "l", Seats: 1, Queues: 8, HandSize: 2, QueueLengthLimit: 3,
			GetExec: 100 * time.Millisecond, PutExec: 100 * time.Millisecond, ResetDelay: time.Millisecond}
		l, err := NewLevel(cfg, NewStats(100*time.Millisecond, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for range 2 { // one executing, one queued
			go func() {
				_, err := get(t, l, context.Background())
				errs <- err
			}()
			synctest.Wait()
		}
		l.SetDown(true)
		for range 2 {
			if err := <-errs; !utilnet.IsConnectionReset(err) {
				t.Errorf("request in flight when the level went down: %v, want a reset connection", err)
			}
		}
		if _, err := get(t, l, t.Context()); !utilnet.IsConnectionReset(err) {
			t.Errorf("request while down: %v, want a reset connection", err)
		}
		l.SetDown(false)
		if resp, err := get(t, l, t.Context()); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("request after: %v, %v, want 200", resp, err)
		}
	})
}

package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// scriptedAPI is an HTTP server that answers client-go as an apiserver
// would, failing the first requests of each path as told: a 503 with
// Retry-After 0 (client-go resends it at once), or a connection closed
// before any answer (client-go resends a GET, or a watch, 1s later).
type scriptedAPI struct {
	mu       sync.Mutex
	failures map[string][]string // path: "503" or "close", one per request
}

func (s *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var fail string
	if f := s.failures[r.URL.Path]; len(f) > 0 {
		fail, s.failures[r.URL.Path] = f[0], f[1:]
	}
	s.mu.Unlock()
	switch fail {
	case "503":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503,"reason":"ServiceUnavailable","message":"down"}`)
		return
	case "close":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Query().Get("watch") == "true":
		w.WriteHeader(http.StatusOK) // a watch that ends at once, with no event
	case r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader":
		fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"leader","namespace":"kube-system","resourceVersion":"1"}}`)
	default:
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"default","resourceVersion":"1"}}`)
	}
}

// scriptedClient returns a clientset of api's, through b.WrapTransport
// (none for a nil b) above a reqcount.Counter of the wire, and a context
// for its calls; the server stops when t ends.
func scriptedClient(t *testing.T, api *scriptedAPI, b *retry.Budget) (kubernetes.Interface, *reqcount.Counter, context.Context) {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	wire := &reqcount.Counter{}
	cfg := wire.Config(&rest.Config{Host: srv.URL})
	if b != nil {
		cfg.Wrap(b.WrapTransport)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return client, wire, ctx
}

// TestWrapTransportClientGo runs client-go's typed clients through
// budget.WrapTransport against a server that fails once: without a
// budget client-go resends the request itself; with a budget that has a
// retry, the resend is charged as a retry; with a budget that has none, the
// resend is refused before the wire and client-go returns the refusal at
// once, for every verb and for a watch (which is not turned into an empty
// one). Leader election's Lease requests are never refused. The wire is
// counted with reqcount below the budget.
func TestWrapTransportClientGo(t *testing.T) {
	t.Parallel()
	const cmPath = "/api/v1/namespaces/default/configmaps/cm"
	calls := []struct {
		name string
		path string
		fail string
		call func(context.Context, kubernetes.Interface) error
	}{ // client-go waits 0s before it resends after a 503 with Retry-After 0, 1s after a closed connection
		{"Get, 503", cmPath, "503", func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
			return err
		}},
		{"Update, 503", cmPath, "503", func(ctx context.Context, c kubernetes.Interface) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", ResourceVersion: "1"}}
			_, err := c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}},
		{"Get, connection closed", cmPath, "close", func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
			return err
		}},
		{"Watch, connection closed", "/api/v1/namespaces/default/configmaps", "close", func(ctx context.Context, c kubernetes.Interface) error {
			w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			defer w.Stop()
			if _, ok := w.(*watch.StreamWatcher); !ok {
				return fmt.Errorf("a %T, not the server's watch", w) // client-go's empty watch
			}
			return nil
		}},
	}
	budgets := []struct {
		name     string
		budget   func() *retry.Budget
		wire     int // requests that reach the server
		want     retry.BudgetStats
		refused  bool
		noBudget bool
	}{
		{name: "no budget", noBudget: true, wire: 2},
		{name: "a retry to spare", budget: func() *retry.Budget { return &retry.Budget{MinPerSecond: 1, Window: time.Minute} },
			wire: 2, want: retry.BudgetStats{FirstAttempts: 1, Retries: 1}},
		{name: "no retry", budget: func() *retry.Budget { return &retry.Budget{Window: time.Minute} },
			wire: 1, want: retry.BudgetStats{FirstAttempts: 1, Refused: 1}, refused: true},
	}
	for _, c := range calls {
		for _, bc := range budgets {
			t.Run(c.name+"/"+bc.name, func(t *testing.T) {
				t.Parallel()
				var b *retry.Budget
				if !bc.noBudget {
					b = bc.budget()
				}
				api := &scriptedAPI{failures: map[string][]string{c.path: {c.fail}}}
				client, wire, ctx := scriptedClient(t, api, b)
				start := time.Now()
				err := c.call(ctx, client)
				took := time.Since(start)
				sent := 0
				for _, n := range wire.Snapshot() {
					sent += n
				}
				if sent != bc.wire {
					t.Errorf("%d requests reached the server, want %d", sent, bc.wire)
				}
				if bc.refused {
					if !errors.Is(err, retry.ErrBudgetExhausted) {
						t.Fatalf("got %v, want the budget's refusal", err)
					}
					// client-go returns the refusal without waiting for
					// another resend (one more would wait at least 1s).
					resendWait := time.Duration(0)
					if c.fail == "close" {
						resendWait = time.Second
					}
					if took > resendWait+900*time.Millisecond {
						t.Errorf("client-go took %v to return the refusal: it waited to resend again", took)
					}
				} else if err != nil {
					t.Fatalf("got %v, want success after client-go's resend", err)
				}
				if b != nil && b.Stats() != bc.want {
					t.Errorf("Stats %+v, want %+v", b.Stats(), bc.want)
				}
			})
		}
	}

	t.Run("Lease", func(t *testing.T) {
		t.Parallel()
		const leasePath = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader"
		api := &scriptedAPI{failures: map[string][]string{leasePath: {"503", "503"}}}
		b := &retry.Budget{Window: time.Minute, Hold: time.Hour}
		client, wire, ctx := scriptedClient(t, api, b)
		// Start a hold: a ConfigMap's resend refused after a 503.
		api.mu.Lock()
		api.failures[cmPath] = []string{"503", "503"}
		api.mu.Unlock()
		if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); !errors.Is(err, retry.ErrBudgetExhausted) {
			t.Fatalf("got %v, want a refusal", err)
		}
		lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "leader", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Lease, resent by client-go during the hold: %v", err)
		}
		lease = lease.DeepCopy()
		lease.Spec = coordinationv1.LeaseSpec{}
		if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("the Lease's update during the hold: %v", err)
		}
		got := wire.Snapshot()
		if n := got.Resource("leases"); n != 4 {
			t.Errorf("%d Lease requests reached the server, want 4 (3 gets, an update): %v", n, got)
		}
		if st := b.Stats(); st != (retry.BudgetStats{FirstAttempts: 1, Refused: 1}) {
			t.Errorf("Stats %+v: the Leases must not count", st)
		}
	})
}

package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/poll"
)

// TestHoldsSeen runs an outage and a webhook failure on the in-process
// apiserver with NewBudget() on the wire, set up as the README recommends
// (ctrlretry.BudgetMetrics registered, OnHold set to ctrlretry.LogHolds),
// and reads what an operator would see: the log lines and the registry.
// Each scope that was held has one start line and then one end line per
// hold, the scope is the one that failed (the server in the outage, the
// Secrets' writes when the webhook fails) and no other, the hold's gauge
// was scraped while it lasted, and no series is left once it ended.
func TestHoldsSeen(t *testing.T) {
	s := startServer(t)
	t.Run("outage", func(t *testing.T) {
		ns := createNamespace(t, s, "holds-outage-")
		proxy, err := faultproxy.New(faultHostOf(t, s.Config.Host))
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		w := newHoldWatch(t, s.Config, func(cfg *rest.Config) { cfg.Host = "https://" + proxy.Addr() })
		objs := make([]*corev1.ConfigMap, 4)
		for i := range objs {
			var err error
			objs[i], err = s.Client.CoreV1().ConfigMaps(ns).Create(t.Context(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("worker-", i)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		cms := w.client.CoreV1().ConfigMaps(ns)
		w.run(t, len(objs), func(ctx context.Context, i, n int) error {
			got, err := retry.Update(ctx, retry.DefaultRetry, cms, objs[i], func(cm *corev1.ConfigMap) error {
				cm.Data = map[string]string{"n": fmt.Sprint(n)}
				return nil
			})
			if err == nil {
				objs[i] = got
			}
			return err
		}, func() {
			proxy.SetOutage(true)
			time.Sleep(2 * time.Second)
			proxy.SetOutage(false)
		})
		w.check(t, "https://"+proxy.Addr(), "")
	})
	t.Run("webhook", func(t *testing.T) {
		ns := createNamespace(t, s, "holds-webhook-")
		secret := func(name string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{webhookLabel: "fail"}}}
		}
		objs := make([]*corev1.Secret, 2)
		for i, name := range []string{"worker-0", "worker-1", "check"} {
			obj, err := s.Client.CoreV1().Secrets(ns).Create(t.Context(), secret(name), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if i < len(objs) {
				objs[i] = obj
			}
		}
		w := newHoldWatch(t, s.Config, nil)
		secrets := w.client.CoreV1().Secrets(ns)
		w.run(t, len(objs), func(ctx context.Context, i, n int) error {
			got, err := retry.Update(ctx, retry.DefaultRetry, secrets, objs[i], func(s *corev1.Secret) error {
				s.Data = map[string][]byte{"n": []byte(fmt.Sprint(n))}
				return nil
			})
			if err == nil {
				objs[i] = got
			}
			return err
		}, func() {
			startWebhookDown(t, s, ns)
			time.Sleep(2 * time.Second)
			if err := stopWebhook(t, t.Context(), s, ns); err != nil {
				t.Error(err)
			}
		})
		w.check(t, "writes of secrets", "500 Internal Server Error")
	})
}

// holdWatch is a client whose Budget an operator watches: its hold lines
// logged by LogHolds, its metrics registered by BudgetMetrics, the
// registry scraped every 20ms while the workers run.
type holdWatch struct {
	budget *retry.Budget
	reg    *prometheus.Registry
	client *kubernetes.Clientset

	mu      sync.Mutex
	lines   []map[string]any
	raw     []string           // the lines as funcr wrote them
	scraped map[string]float64 // the longest hold_seconds seen, by scope
	peak    []string           // the scrape that saw the longest, as text
	final   map[string]float64 // the last scrape's hold_seconds
	// finalText is the last scrape, as text.
	finalText []string
}

func newHoldWatch(t *testing.T, server *rest.Config, edit func(*rest.Config)) *holdWatch {
	t.Helper()
	w := &holdWatch{reg: prometheus.NewRegistry(), scraped: map[string]float64{}}
	budget := retry.NewBudget()
	budget.OnHold = ctrlretry.LogHolds(funcr.NewJSON(w.log, funcr.Options{}))
	w.reg.MustRegister(ctrlretry.BudgetMetrics(budget))
	cfg := rest.CopyConfig(server)
	cfg.Wrap(budget.WrapTransport)
	cfg.QPS, cfg.Burst = 1000, 10000
	if edit != nil {
		edit(cfg)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.budget, w.client = budget, client
	return w
}

// log keeps a JSON line of funcr's.
func (w *holdWatch) log(line string) {
	var fields map[string]any
	if err := json.Unmarshal([]byte(line), &fields); err != nil {
		fields = map[string]any{"unparsed": line}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fields)
	w.raw = append(w.raw, line)
}

// scrape gathers the registry and returns hold_seconds by scope, and
// every sample as a line of Prometheus's text format.
func (w *holdWatch) scrape(t *testing.T) (held map[string]float64, text []string) {
	mfs, err := w.reg.Gather()
	if err != nil {
		t.Errorf("gather: %v", err)
	}
	held = map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			value := m.GetCounter().GetValue()
			name := mf.GetName()
			if name == "kuberetry_budget_hold_seconds" {
				scope := m.GetLabel()[0].GetValue()
				held[scope], value = m.GetGauge().GetValue(), m.GetGauge().GetValue()
				name += fmt.Sprintf("{scope=%q}", scope)
			}
			text = append(text, fmt.Sprintf("%s %g", name, value))
		}
	}
	return held, text
}

// run starts a worker per object, each calling call with its index and
// its call's number every 50ms (each call bounded by 3s), runs fault (which
// makes the failure and ends it), and stops the workers once each has
// succeeded since and nothing is held. It scrapes the registry meanwhile.
func (w *holdWatch) run(t *testing.T, workers int, call func(ctx context.Context, worker, n int) error, fault func()) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	since := make([]bool, workers) // succeeded since the fault ended
	faultOver := false
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ctx.Err() == nil; n++ {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := call(cctx, i, n)
				cancel()
				mu.Lock()
				if err == nil && faultOver {
					since[i] = true
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			held, text := w.scrape(t)
			w.mu.Lock()
			for scope, secs := range held {
				if secs > w.scraped[scope] {
					w.scraped[scope], w.peak = secs, text
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	time.Sleep(500 * time.Millisecond) // healthy first
	fault()
	mu.Lock()
	faultOver = true
	mu.Unlock()
	if err := poll.Until(ctx, 20*time.Millisecond, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ok := range since {
			if !ok {
				return false
			}
		}
		return len(w.budget.Held()) == 0
	}); err != nil {
		t.Errorf("20s after the failure ended, the workers' success since: %v; held: %+v", since, w.budget.Held())
	}
	stop()
	wg.Wait()
	w.final, w.finalText = w.scrape(t)
}

// check checks what the operator saw: a start line then an end line for
// each hold, every one of the scope want, whose first error names
// wantErr; the hold's gauge scraped while it lasted and gone after; the
// counters of the held calls and probes above 0.
func (w *holdWatch) check(t *testing.T, want, wantErr string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("the log:\n%s", strings.Join(w.raw, "\n"))
	open := map[string]bool{}
	holds := 0
	for i, l := range w.lines {
		scope, _ := l["scope"].(string)
		switch l["msg"] {
		case "retry budget holds requests":
			if open[scope] {
				t.Errorf("line %d: a second start of %q before its end", i, scope)
			}
			open[scope] = true
			holds++
			if e, _ := l["error"].(string); e == "" || !strings.Contains(e, wantErr) {
				t.Errorf("line %d: the error %q does not name %q", i, e, wantErr)
			}
		case "retry budget released requests":
			if !open[scope] {
				t.Errorf("line %d: an end of %q with no start before it", i, scope)
			}
			open[scope] = false
			if _, err := time.ParseDuration(fmt.Sprint(l["held"])); err != nil {
				t.Errorf("line %d: held %v is not a duration: %v", i, l["held"], err)
			}
			if p, _ := l["probes"].(float64); p < 1 {
				t.Errorf("line %d: %v probes, want at least the one that ended the hold", i, l["probes"])
			}
		default:
			t.Errorf("line %d: %v is not a hold's line", i, l)
		}
		if scope != want {
			t.Errorf("line %d: scope %q, want %q alone", i, scope, want)
		}
	}
	for scope, on := range open {
		if on {
			t.Errorf("%q: a start with no end", scope)
		}
	}
	if holds == 0 {
		t.Errorf("no hold was logged; want %q held", want)
	}
	if w.scraped[want] <= 0 {
		t.Errorf("kuberetry_budget_hold_seconds{scope=%q} was never scraped above 0 (scraped: %v)", want, w.scraped)
	}
	if len(w.final) > 0 {
		t.Errorf("series left after the holds ended: %v", w.final)
	}
	stats := w.budget.Stats()
	if stats.Held == 0 || stats.Probes == 0 {
		t.Errorf("budget stats %+v: want calls held and probes sent", stats)
	}
	t.Logf("%d holds of %q; stats %+v; the scrape that saw the longest hold:\n%s\nthe last scrape:\n%s",
		holds, want, stats, strings.Join(w.peak, "\n"), strings.Join(w.finalText, "\n"))
}

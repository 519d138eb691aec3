package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// testAttemptTimeout writes through a proxy that holds every byte the
// apiserver sends for 1.5s, a server that accepts requests and answers
// none, with each attempt bounded at 300ms by WithAttemptTimeout: the
// attempts that ran out of their time are retried (although Update
// retries no read error otherwise) and the call returns nil once the
// server answers again. The same write bounded by client-go's
// rest.Config.Timeout instead returns its timeout after one attempt.
func testAttemptTimeout(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "stall-")
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(faultHostOf(t, s.Config.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	defer proxy.Release() // however the test ends, nothing stays held
	// The serving certificate names 127.0.0.1, which the proxy's address
	// is too, and the loopback credentials are the server's own.
	cfg := rest.CopyConfig(s.Config)
	cfg.Host = "https://" + proxy.Addr()
	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	// A first request opens the connection, so that the stall holds
	// responses rather than a TLS handshake.
	if _, err := cms.Get(ctx, "app", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	const stall, perAttempt = 1500 * time.Millisecond, 300 * time.Millisecond
	backoff := retry.Backoff{Steps: 20, Duration: 100 * time.Millisecond, Factor: 1, Jitter: 0.1}
	label := func(phase string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error {
			metav1.SetMetaDataLabel(&cm.ObjectMeta, "example.com/phase", phase)
			return nil
		}
	}
	app := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}

	var timedOut, other int
	before := wire.Snapshot()
	proxy.Delay(stall)
	start := time.Now()
	cm, err := retry.Update(ctx, backoff, cms, app, label("ready"),
		retry.WithAttemptTimeout(perAttempt),
		retry.WithOnRetry(func(e retry.RetryEvent) {
			if errors.Is(e.Err, context.DeadlineExceeded) {
				timedOut++
			} else {
				other++
			}
		}))
	took := time.Since(start)
	sent := wire.Snapshot().Sub(before)
	t.Logf("responses held %v, each attempt bounded at %v: Update returned %v after %v; %d attempts ran out of their time (%d other retries); requests %v; proxy %+v",
		stall, perAttempt, err, took.Round(10*time.Millisecond), timedOut, other, sent, proxy.Stats())
	if err != nil {
		t.Fatalf("Update with an attempt timeout through the stall: %v", err)
	}
	if cm.Labels["example.com/phase"] != "ready" {
		t.Errorf("Update returned labels %v", cm.Labels)
	}
	if took < stall-50*time.Millisecond {
		t.Errorf("Update returned after %v, before the stall of %v ended: the server was not stalled", took, stall)
	}
	if timedOut < 2 || other != 0 {
		t.Errorf("%d attempts timed out and %d retries for another reason; want at least 2 and none", timedOut, other)
	}
	if sent[reqcount.Key{Verb: "update", Resource: "configmaps"}] < 1 || sent[reqcount.Key{Verb: "get", Resource: "configmaps"}] < timedOut {
		t.Errorf("requests %v: want a GET per attempt and at least one PUT", sent)
	}
	live, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil || live.Labels["example.com/phase"] != "ready" {
		t.Errorf("the server holds labels %v (%v)", live.Labels, err)
	}

	// client-go's own bound: rest.Config.Timeout ends the request, and the
	// loop has nothing to retry it by.
	bounded := rest.CopyConfig(cfg)
	bounded.Timeout = perAttempt
	client2, err := kubernetes.NewForConfig(bounded)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Delay(stall)
	start = time.Now()
	attempts := 0
	_, err = retry.Update(ctx, backoff, client2.CoreV1().ConfigMaps(ns), app, label("done"),
		retry.WithOnDone(func(e retry.DoneEvent) { attempts = e.Attempts }))
	took = time.Since(start)
	proxy.Release()
	t.Logf("the same write with rest.Config.Timeout %v instead: %d attempt, returned after %v: %v (IsTransient %v)",
		perAttempt, attempts, took.Round(10*time.Millisecond), err, retry.IsTransient(err))
	if err == nil || attempts != 1 || took >= stall {
		t.Errorf("with rest.Config.Timeout: %d attempts, %v after %v; want the timeout after one attempt, before the stall ended", attempts, err, took)
	}
}

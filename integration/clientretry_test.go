package integration_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// TestClientGoRetriesReset measures, on the wire, what a retry loop
// around a client-go request cannot see or bound: client-go's own retries.
// Behind a proxy in an outage, where every connection is reset at once, a
// typed clientset's GET is sent 11 times about 1s apart (client-go
// retries a GET that meets a reset connection up to 10 times, waiting
// 1s each) before its caller sees the error; the same GET through the
// RESTClient with MaxRetries(0) is sent once, and a typed PUT, which
// client-go never resends after a transport error, once. No apiserver is
// needed: no connection reaches one.
func TestClientGoRetriesReset(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// A port that was just free: the proxy never dials it anyway.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	proxy, err := faultproxy.New(dead)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetOutage(true)

	// Each client records its requests on the wire; sent is when each
	// reached the transport.
	type client struct {
		wire  *reqcount.Counter
		sent  []time.Time
		cs    kubernetes.Interface
		start time.Time
		took  time.Duration
		err   error
	}
	newClient := func() *client {
		c := &client{wire: &reqcount.Counter{KeepRequests: true}}
		cs, err := kubernetes.NewForConfig(c.wire.Config(&rest.Config{
			Host:            "https://" + proxy.Addr(),
			TLSClientConfig: rest.TLSClientConfig{Insecure: true}, // no handshake ever completes
			QPS:             1000,
			Burst:           1000,
		}))
		if err != nil {
			t.Fatal(err)
		}
		c.cs = cs
		return c
	}
	typedGet, restGet, typedPut := newClient(), newClient(), newClient()
	calls := []struct {
		name string
		c    *client
		call func(context.Context, kubernetes.Interface) error
	}{
		{"typed GET", typedGet, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{})
			return err
		}},
		{"RESTClient GET, MaxRetries(0)", restGet, func(ctx context.Context, cs kubernetes.Interface) error {
			return cs.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").Name("x").
				MaxRetries(0).Do(ctx).Error()
		}},
		{"typed PUT", typedPut, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default", ResourceVersion: "1"},
			}, metav1.UpdateOptions{})
			return err
		}},
	}
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call.c.start = time.Now()
			call.c.err = call.call(ctx, call.c.cs)
			call.c.took = time.Since(call.c.start)
		}()
	}
	wg.Wait()

	for _, call := range calls {
		c := call.c
		for _, r := range c.wire.Requests() { // one at a time: in the order sent
			c.sent = append(c.sent, r.Start)
		}
		var gaps []time.Duration
		for i := 1; i < len(c.sent); i++ {
			gaps = append(gaps, c.sent[i].Sub(c.sent[i-1]).Round(10*time.Millisecond))
		}
		t.Logf("%s: %d requests on the wire in %v, gaps %v; error (IsTransient %v): %v",
			call.name, len(c.sent), c.took.Round(10*time.Millisecond), gaps, retry.IsTransient(c.err), c.err)
		if c.err == nil || !retry.IsTransient(c.err) {
			t.Errorf("%s returned %v, want a transient error", call.name, c.err)
		}
	}

	// The typed GET: 1 request and 10 retries, each after client-go's
	// 1s wait (give or take the machine's noise).
	if n := len(typedGet.sent); n != 11 {
		t.Errorf("typed GET: %d requests on the wire, want 11", n)
	}
	for i := 1; i < len(typedGet.sent); i++ {
		if gap := typedGet.sent[i].Sub(typedGet.sent[i-1]); gap < 900*time.Millisecond || gap > 5*time.Second {
			t.Errorf("typed GET: request %d went %v after the one before, want about 1s", i+1, gap)
		}
	}
	// The others: one request each, and the error at once.
	for _, c := range []*client{restGet, typedPut} {
		if n := len(c.sent); n != 1 {
			t.Errorf("%d requests on the wire, want 1", n)
		}
		if c.took > 5*time.Second {
			t.Errorf("a call without client-go retries took %v", c.took)
		}
	}
	if s := proxy.Stats(); s.OutageRejects != int64(len(typedGet.sent)+len(restGet.sent)+len(typedPut.sent)) {
		t.Errorf("proxy stats %+v: want one connection rejected per request", s)
	}
}

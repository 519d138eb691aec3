package ha

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry/integration/testenv/testserver"
)

func TestMain(m *testing.M) {
	testserver.QuietGlobalLogs()
	os.Exit(m.Run())
}

func clientset(t *testing.T, cp *ControlPlane) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestControlPlane starts two apiservers, writes through the balancer and
// reads through each apiserver directly (one prefix), checks that two
// clientsets reach the two apiservers, then takes one out and puts a
// replacement in, which serves what was written.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := Start(testserver.BufferLogs(t), Options{APIServers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 etcd members, 2 apiservers and the balancer in %v", time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(cp.Balancer.Addr(), "127.0.0.1:") {
		t.Fatalf("the balancer listens on %s", cp.Balancer.Addr())
	}
	for _, u := range cp.Etcd.ClientURLs() {
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("etcd client URL %s is not on loopback", u)
		}
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ha", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := clientset(t, cp).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the balancer: %v", err)
	}
	if _, err := clientset(t, cp).CoreV1().ConfigMaps("default").Get(ctx, "ha", metav1.GetOptions{}); err != nil {
		t.Fatalf("get through the balancer with a second clientset: %v", err)
	}
	readEach := func(when string) {
		t.Helper()
		for i := range cp.APIServers() {
			got, err := cp.Server(i).Client.CoreV1().ConfigMaps("default").Get(ctx, "ha", metav1.GetOptions{})
			if err != nil || got.Data["k"] != "v" {
				t.Fatalf("%s, apiserver %d read %v, %v", when, i, got, err)
			}
		}
	}
	readEach("after a create through the balancer")
	// Each clientset made one connection, and they went to one apiserver
	// each.
	hosts := cp.Balancer.Backends()
	routed := cp.Balancer.Stats().Routed
	if len(hosts) != 2 || routed[hosts[0]] != 1 || routed[hosts[1]] != 1 {
		t.Fatalf("connections per apiserver %v, rotation %v: want one to each", routed, hosts)
	}

	reset, err := cp.StopServer(0)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Server(0) != nil || len(cp.Balancer.Backends()) != 1 {
		t.Fatalf("after StopServer(0): server %v, rotation %v", cp.Server(0), cp.Balancer.Backends())
	}
	if _, err := cp.StopServer(0); err == nil {
		t.Errorf("a second StopServer(0) returned nil")
	}
	// What the stopped server's connection held is gone; new clients
	// reach the other one.
	if _, err := clientset(t, cp).CoreV1().ConfigMaps("default").Get(ctx, "ha", metav1.GetOptions{}); err != nil {
		t.Fatalf("get through the balancer after StopServer(0): %v", err)
	}
	if got := cp.Balancer.Stats().Routed[hosts[0]]; got != 1 {
		t.Errorf("the stopped apiserver was given %d connections, want the 1 from before", got)
	}

	if err := cp.ReplaceServer(0); err != nil {
		t.Fatal(err)
	}
	if err := cp.ReplaceServer(0); err == nil {
		t.Errorf("ReplaceServer of a running slot returned nil")
	}
	readEach("after the replacement")
	t.Logf("StopServer reset %d connections; all done in %v", reset, time.Since(start).Round(time.Millisecond))
}

// TestStartFails checks that bad options and an apiserver that does not
// start make Start fail at once, with an error naming what did not start.
func TestStartFails(t *testing.T) {
	for _, n := range []int{0, -1, MaxAPIServers + 1} {
		if _, err := Start(t, Options{APIServers: n}); err == nil || !strings.Contains(err.Error(), "APIServers") {
			t.Errorf("Start with %d apiservers: %v, want an error naming APIServers", n, err)
		}
	}
	start := time.Now()
	_, err := Start(testserver.BufferLogs(t), Options{APIServers: 2, Flags: []string{"--max-requests-inflight=-1"}})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver 1 of 2 did not start") {
		t.Fatalf("Start with a flag no apiserver accepts: %v, want an error naming kube-apiserver 1 of 2", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the failed start took %v", took)
	}
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
}

package aggregated_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kuberetry/retry/integration/testenv/aggregated"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

func TestMain(m *testing.M) {
	testserver.QuietGlobalLogs()
	os.Exit(m.Run())
}

func startServer(t *testing.T) *testserver.Server {
	t.Helper()
	etcd, err := testserver.StartEtcd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	s, err := testserver.Start(testserver.BufferLogs(t), etcd)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// gone checks that TakeDown's objects no longer exist.
func gone(t *testing.T, ctx context.Context, s *testserver.Server, api aggregated.API) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(apiServices).Get(ctx, api.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("APIService %s: got %v, want NotFound", api.Name(), err)
	}
	if _, err := s.Client.CoreV1().Services(api.Namespace).Get(ctx, api.Service, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service %s: got %v, want NotFound", api.Service, err)
	}
}

// TestTakeDown takes a group down on a real kube-apiserver: its resource
// and discovery answer 503 and the APIService is marked unavailable while
// the core API answers; Restore gives the group back (404) and deletes
// what TakeDown created. A probe that never answers 503 is an error that
// names it, and leaves nothing behind.
func TestTakeDown(t *testing.T) {
	ctx := t.Context()
	s := startServer(t)
	api := aggregated.API{
		Group: "down.kuberetry.test", Version: "v1",
		Namespace: "default", Service: "nothing-here",
		Probe:   "/apis/down.kuberetry.test/v1/namespaces/default/widgets",
		Timeout: 20 * time.Second,
	}
	down, err := aggregated.TakeDown(ctx, s.Config, api)
	if err != nil {
		t.Fatal(err)
	}
	if !apierrors.IsServiceUnavailable(down.Answer) || down.Answered <= 0 {
		t.Errorf("Answer %v after %v: want a 503 after the APIService was created", down.Answer, down.Answered)
	}
	for path, want := range map[string]int{
		api.Probe:                      http.StatusServiceUnavailable,
		"/apis/down.kuberetry.test/v1": http.StatusServiceUnavailable,
		"/api/v1/namespaces/default":   http.StatusOK,
	} {
		if code, err := down.Status(ctx, path); code != want {
			t.Errorf("GET %s: %d (%v), want %d", path, code, err, want)
		}
	}
	reason, err := down.WaitUnavailable(ctx, 20*time.Second)
	if err != nil {
		t.Error(err)
	}
	t.Logf("503 after %v; unavailable: %s", down.Answered, reason)

	if err := down.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	var code int
	if err := poll.Until(ctx, 10*time.Millisecond, 10*time.Second, func() bool {
		code, _ = down.Status(ctx, api.Probe)
		return code == http.StatusNotFound
	}); err != nil {
		t.Errorf("after Restore the group answered %d, want 404", code)
	}
	gone(t, ctx, s, api)

	never := api
	never.Probe, never.Timeout = "/api/v1/namespaces/default", 200*time.Millisecond
	if _, err := aggregated.TakeDown(ctx, s.Config, never); err == nil || !strings.Contains(err.Error(), never.Probe) {
		t.Errorf("TakeDown with a probe that answers 200: got %v, want an error naming the probe", err)
	}
	gone(t, ctx, s, never)
}

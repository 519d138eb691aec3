package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// The aggregated API of TestPartialFailureAggregatedAPI: a group of the
// test's own, and a namespaced resource of it that the failing workers get.
const (
	aggGroup    = "metrics.kuberetry.test"
	aggVersion  = "v1beta1"
	aggResource = "widgets"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// TestPartialFailureAggregatedAPI is issue 27's aggregated API that is
// down: an APIService for a group of the test's own, backed by a Service
// without a selector and with no endpoints, so the aggregator answers 503
// for the group's paths (its resources and its discovery) while the rest
// of the API is fine. One controller process with NewBudget() on its
// typed clientset's transport (client-go's own retries on) runs 15
// healthy workers updating their own ConfigMaps with Update, 4 workers
// getting a namespaced resource of the group through a dynamic client and
// one running the group's discovery (/apis/GROUP/VERSION, as a RESTMapper
// does), each failing call inside OnErrorValue(IsTransient) and the next
// 100ms after it; the same process without a budget runs at the same time.
// Two phases: quiet (each healthy worker a call a second) and busy (the
// next call 50ms after the last), each 5s; at the end of the busy one the
// APIService is deleted while the failing workers go on. checkPartial
// asserts the targets.
func TestPartialFailureAggregatedAPI(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "partial-aggregated-")
	admin, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	startAggregatedAPIDown(t, s, admin, ns)

	widgets := schema.GroupVersionResource{Group: aggGroup, Version: aggVersion, Resource: aggResource}
	setup := &pfSetup{
		s:  s,
		ns: ns,
		classify: func(req *http.Request) pfClass {
			switch p := strings.TrimSuffix(req.URL.Path, "/"); {
			case p == "/apis/"+aggGroup || p == "/apis/"+aggGroup+"/"+aggVersion:
				return pfDiscovery
			case strings.HasPrefix(p, "/apis/"+aggGroup+"/"):
				return pfFailing
			case strings.HasPrefix(p, "/api/v1/namespaces/"+ns+"/configmaps/"):
				return pfHealthy
			}
			return pfOther
		},
		failingOf: func(f *pfFigures) int { return total(f.wire[pfFailing]) + total(f.wire[pfDiscovery]) },
	}
	recovered := func(err error) bool { return err == nil || apierrors.IsNotFound(err) }
	for i := range 4 {
		name := fmt.Sprintf("get-%d", i)
		setup.failing = append(setup.failing, pfWorker{name: name, class: pfFailing, recovered: recovered,
			newCall: func(_ *testing.T, p *pfProcess, _ pfPhase) func(context.Context) error {
				ws := p.dyn.Resource(widgets).Namespace(ns)
				return func(ctx context.Context) error {
					_, err := ws.Get(ctx, name, metav1.GetOptions{})
					return err
				}
			}})
	}
	setup.failing = append(setup.failing, pfWorker{name: "discovery", class: pfDiscovery, recovered: recovered,
		newCall: func(_ *testing.T, p *pfProcess, _ pfPhase) func(context.Context) error {
			return func(ctx context.Context) error {
				_, err := p.disc.ServerResourcesForGroupVersionWithContext(ctx, aggGroup+"/"+aggVersion)
				return err
			}
		}})

	for _, ph := range []pfPhase{
		{name: "quiet", pause: time.Second, length: 5 * time.Second},
		{name: "busy", pause: 50 * time.Millisecond, length: 5 * time.Second, fix: func(ctx context.Context) error {
			return stopAggregatedAPI(t, ctx, s, admin, ns)
		}},
	} {
		t.Run(ph.name, func(t *testing.T) {
			none, ours := runPartial(t, setup, ph)
			for _, f := range []*pfFigures{none, ours} {
				for _, c := range []pfClass{pfFailing, pfDiscovery} {
					if n := f.outcomes[c].Count(func(o reqcount.Outcome) bool { return o.Code != 503 }); n > 0 {
						t.Errorf("%s: %d %s requests answered other than 503 during the phase: %s", f.name, n, c, f.outcomes[c])
					}
				}
			}
			checkPartial(t, setup, ph, none, ours)
		})
	}
}

// aggPath is the path of the failing group's object name in ns.
func aggPath(ns, name string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s", aggGroup, aggVersion, ns, aggResource, name)
}

// statusOf returns the status code the server answers a GET of path with,
// through s's own client (no budget).
func statusOf(ctx context.Context, s *testserver.Server, path string) (int, error) {
	var code int
	err := s.Client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).StatusCode(&code).Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	return code, err
}

// startAggregatedAPIDown registers the APIService of aggGroup, backed by a
// Service with no endpoints, and waits until the aggregator answers 503 for
// the group's resource and its discovery. It reports how long that took
// and how long the APIService took to be marked unavailable.
func startAggregatedAPIDown(t *testing.T, s *testserver.Server, admin dynamic.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	// No selector and no Endpoints or EndpointSlice: nothing serves it.
	if _, err := s.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-down"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(443)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if _, err := admin.Resource(apiServices).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": aggVersion + "." + aggGroup},
		"spec": map[string]any{
			"group":                 aggGroup,
			"version":               aggVersion,
			"groupPriorityMinimum":  int64(1000),
			"versionPriority":       int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": ns, "name": "metrics-down", "port": int64(443)},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int
	var lastErr error
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
		code, lastErr = statusOf(ctx, s, aggPath(ns, "w"))
		return code == http.StatusServiceUnavailable
	}); err != nil {
		t.Fatalf("the aggregator never answered 503 for %s: last %d, %v", aggPath(ns, "w"), code, lastErr)
	}
	answered := time.Since(created)
	discCode, discErr := statusOf(ctx, s, "/apis/"+aggGroup+"/"+aggVersion)
	if discCode != http.StatusServiceUnavailable {
		t.Fatalf("the group's discovery answered %d (%v), want 503", discCode, discErr)
	}
	var reason string
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
		obj, err := admin.Resource(apiServices).Get(ctx, aggVersion+"."+aggGroup, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "False" {
				reason = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return true
			}
		}
		return false
	}); err != nil {
		t.Errorf("the APIService was never marked unavailable: %v", err)
	}
	t.Logf("the aggregator answered 503 for the group %v after the APIService was created (%v); its discovery 503 too (%v); the APIService unavailable after %v (%s)",
		answered.Round(time.Millisecond), lastErr, discErr, time.Since(created).Round(time.Millisecond), reason)
}

// stopAggregatedAPI deletes the APIService and reports when the server
// itself answers 404 for the group's resource.
func stopAggregatedAPI(t *testing.T, ctx context.Context, s *testserver.Server, admin dynamic.Interface, ns string) error {
	deleted := time.Now()
	if err := admin.Resource(apiServices).Delete(ctx, aggVersion+"."+aggGroup, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete the APIService: %w", err)
	}
	var code int
	if err := poll.Until(ctx, 5*time.Millisecond, 10*time.Second, func() bool {
		code, _ = statusOf(ctx, s, aggPath(ns, "w"))
		return code == http.StatusNotFound
	}); err != nil {
		return fmt.Errorf("the group still answered %d 10s after its APIService was deleted", code)
	}
	t.Logf("the APIService deleted: the server answered 404 for the group after %v", time.Since(deleted).Round(time.Millisecond))
	return nil
}

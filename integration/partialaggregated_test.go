package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kuberetry/retry/integration/testenv/aggregated"
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
	down := startAggregatedAPIDown(t, s, ns)

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
			return stopAggregatedAPI(t, ctx, down, ns)
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

// startAggregatedAPIDown takes aggGroup down (its APIService backed by a
// Service with no endpoints) and waits until the aggregator answers 503
// for the group's resource and its discovery. It reports how long that
// took and how long the APIService took to be marked unavailable.
func startAggregatedAPIDown(t *testing.T, s *testserver.Server, ns string) *aggregated.Down {
	t.Helper()
	ctx := t.Context()
	down, err := aggregated.TakeDown(ctx, s.Config, aggregated.API{
		Group: aggGroup, Version: aggVersion,
		Namespace: ns, Service: "metrics-down",
		Probe: aggPath(ns, "w"), Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	discCode, discErr := down.Status(ctx, "/apis/"+aggGroup+"/"+aggVersion)
	if discCode != http.StatusServiceUnavailable {
		t.Fatalf("the group's discovery answered %d (%v), want 503", discCode, discErr)
	}
	reason, err := down.WaitUnavailable(ctx, 20*time.Second)
	if err != nil {
		t.Error(err)
	}
	t.Logf("the aggregator answered 503 for the group %v after the APIService was created (%v); its discovery 503 too (%v); the APIService unavailable after %v (%s)",
		down.Answered.Round(time.Millisecond), down.Answer, discErr, time.Since(down.Created).Round(time.Millisecond), reason)
	return down
}

// stopAggregatedAPI deletes the APIService (and its Service) and reports
// when the server itself answers 404 for the group's resource.
func stopAggregatedAPI(t *testing.T, ctx context.Context, down *aggregated.Down, ns string) error {
	deleted := time.Now()
	if err := down.Restore(ctx); err != nil {
		return err
	}
	var code int
	if err := poll.Until(ctx, 5*time.Millisecond, 10*time.Second, func() bool {
		code, _ = down.Status(ctx, aggPath(ns, "w"))
		return code == http.StatusNotFound
	}); err != nil {
		return fmt.Errorf("the group still answered %d 10s after its APIService was deleted", code)
	}
	t.Logf("the APIService deleted: the server answered 404 for the group after %v", time.Since(deleted).Round(time.Millisecond))
	return nil
}

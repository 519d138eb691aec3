package ctrlretry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testclock "k8s.io/utils/clock/testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// heldBudget returns a Budget on a fake clock (NewBudget's, not on the
// wire, with OnHold set to onHold) whose hold three failed calls started,
// and the clock.
func heldBudget(t *testing.T, onHold func(retry.HoldEvent)) (*retry.Budget, *testclock.FakeClock) {
	t.Helper()
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := retry.NewBudget()
	b.Clock, b.OnHold = clk, onHold
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	once := retry.Backoff{Steps: 1}
	for range 3 {
		err := retry.OnErrorWithContext(context.Background(), once, retry.IsTransient,
			func(context.Context) error { return unavailable }, retry.WithBudget(b))
		if !errors.Is(err, unavailable) {
			t.Fatalf("a failing call returned %v, want %v", err, unavailable)
		}
	}
	if held := b.Held(); len(held) != 1 {
		t.Fatalf("after 3 failed first attempts Held is %v, want one hold", held)
	}
	return b, clk
}

// gather registers c on a new registry and returns its families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}

func counterOf(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil || mf.GetType() != dto.MetricType_COUNTER || len(mf.Metric) != 1 {
		t.Fatalf("%s: %v, want one counter", name, mf)
	}
	return mf.Metric[0].GetCounter().GetValue()
}

func TestBudgetMetrics(t *testing.T) {
	b, clk := heldBudget(t, nil)
	c := ctrlretry.BudgetMetrics(b)
	clk.Step(250 * time.Millisecond)

	mfs := gather(t, c)
	stats := b.Stats()
	for name, want := range map[string]uint64{
		"kuberetry_budget_first_attempts_total": stats.FirstAttempts,
		"kuberetry_budget_retries_total":        stats.Retries,
		"kuberetry_budget_refused_total":        stats.Refused,
		"kuberetry_budget_held_total":           stats.Held,
		"kuberetry_budget_probes_total":         stats.Probes,
	} {
		if got := counterOf(t, mfs, name); got != float64(want) {
			t.Errorf("%s = %v, want %d (Stats %+v)", name, got, want, stats)
		}
	}
	if got := counterOf(t, mfs, "kuberetry_budget_first_attempts_total"); got != 3 {
		t.Errorf("first attempts %v, want the 3 failed calls", got)
	}
	hold := mfs["kuberetry_budget_hold_seconds"]
	if hold == nil || hold.GetType() != dto.MetricType_GAUGE || len(hold.Metric) != 1 {
		t.Fatalf("kuberetry_budget_hold_seconds: %v, want one gauge series", hold)
	}
	m := hold.Metric[0]
	if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "scope" || l[0].GetValue() != b.Held()[0].Scope {
		t.Errorf("hold series labels %v, want scope=%q", l, b.Held()[0].Scope)
	}
	if got := m.GetGauge().GetValue(); got != 0.25 {
		t.Errorf("hold seconds %v, want 0.25 (the fake clock's step since the hold began)", got)
	}

	// A probe that succeeds ends the hold: its series goes.
	if err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient,
		func(context.Context) error { return nil }, retry.WithBudget(b)); err != nil {
		t.Fatal(err)
	}
	mfs = gather(t, ctrlretry.BudgetMetrics(b))
	if hold := mfs["kuberetry_budget_hold_seconds"]; hold != nil {
		t.Errorf("after the hold ended: %v, want no series", hold)
	}
	if got := counterOf(t, mfs, "kuberetry_budget_probes_total"); got != 1 {
		t.Errorf("probes %v, want 1: the call that ended the hold", got)
	}
}

// The names, types and help texts follow Prometheus's conventions, as
// promlint checks them.
func TestBudgetMetricsLint(t *testing.T) {
	b, _ := heldBudget(t, nil)
	problems, err := testutil.CollectAndLint(ctrlretry.BudgetMetrics(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestBudgetMetricsInvalid(t *testing.T) {
	for name, b := range map[string]*retry.Budget{
		"nil":         nil,
		"zero Window": {Ratio: 0.1},
	} {
		t.Run(name, func(t *testing.T) {
			err := prometheus.NewRegistry().Register(ctrlretry.BudgetMetrics(b))
			if !errors.Is(err, retry.ErrInvalidBudget) || !strings.Contains(err.Error(), "ctrlretry: BudgetMetrics") {
				t.Fatalf("Register = %v, want an error naming BudgetMetrics and matching retry.ErrInvalidBudget", err)
			}
			if name == "zero Window" && !strings.Contains(err.Error(), "Window 0s") {
				t.Errorf("%v does not name the field and its value", err)
			}
		})
	}
}

// Two Budgets' collectors on one registry, told apart by a wrapping label.
func TestBudgetMetricsTwoBudgets(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"cache", "writer"} {
		wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"budget": name}, reg)
		if err := wrapped.Register(ctrlretry.BudgetMetrics(retry.NewBudget())); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	n, err := testutil.GatherAndCount(reg, "kuberetry_budget_first_attempts_total")
	if err != nil || n != 2 {
		t.Fatalf("first attempts series: %d, %v; want 2", n, err)
	}
}

package ctrlretry

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuberetry/retry"
)

// BudgetMetrics returns a Prometheus collector of b, for controller-runtime's
// registry:
//
//	metrics.Registry.MustRegister(ctrlretry.BudgetMetrics(budget))
//
// At each scrape it reads b's [retry.Budget.Stats] as five counters,
// kuberetry_budget_first_attempts_total, _retries_total, _refused_total,
// _held_total and _probes_total, and b's [retry.Budget.Held] as the gauge
// kuberetry_budget_hold_seconds{scope}: for each scope held now, the
// seconds since its hold started on b's Clock. A scope not held has no
// series. It sets no hook: b.OnHold stays the caller's.
//
// The series carry no label naming b: to register the collectors of two
// Budgets on one registry, wrap it, e.g.
// prometheus.WrapRegistererWith(prometheus.Labels{"budget": "cache"}, metrics.Registry).
// A nil or invalid b gives a collector whose registration fails with
// [retry.Budget.Validate]'s error. The collector is safe for concurrent
// scrapes. See docs/metrics.md for the series an outage produces.
func BudgetMetrics(b *retry.Budget) prometheus.Collector {
	if err := b.Validate(); err != nil {
		err = fmt.Errorf("ctrlretry: BudgetMetrics: %w", err)
		return invalidCollector{desc: prometheus.NewInvalidDesc(err), err: err}
	}
	return &budgetCollector{budget: b}
}

// budgetCollector is BudgetMetrics's collector.
type budgetCollector struct{ budget *retry.Budget }

// budgetCounters are the counters of a Budget's Stats, in the order of
// [retry.BudgetStats]'s fields.
var budgetCounters = [...]struct {
	desc *prometheus.Desc
	read func(retry.BudgetStats) uint64
}{
	{budgetDesc("first_attempts_total", "First attempts the retry budget counted, probes included."),
		func(s retry.BudgetStats) uint64 { return s.FirstAttempts }},
	{budgetDesc("retries_total", "Retries the retry budget granted."),
		func(s retry.BudgetStats) uint64 { return s.Retries }},
	{budgetDesc("refused_total", "Retries the retry budget refused, and calls without a context refused during a hold."),
		func(s retry.BudgetStats) uint64 { return s.Refused }},
	{budgetDesc("held_total", "First attempts that waited for a hold of the retry budget."),
		func(s retry.BudgetStats) uint64 { return s.Held }},
	{budgetDesc("probes_total", "First attempts the retry budget sent as probes during a hold."),
		func(s retry.BudgetStats) uint64 { return s.Probes }},
}

var holdSeconds = prometheus.NewDesc("kuberetry_budget_hold_seconds",
	"How long each scope the retry budget holds now has been held.", []string{"scope"}, nil)

func budgetDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("kuberetry_budget_"+name, help, nil, nil)
}

// Describe sends the descriptors of every series the collector may send.
func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range budgetCounters {
		ch <- m.desc
	}
	ch <- holdSeconds
}

// Collect reads the budget's Stats and Held.
func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.budget.Stats()
	for _, m := range budgetCounters {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.read(stats)))
	}
	held := c.budget.Held()
	if len(held) == 0 {
		return
	}
	now := time.Now()
	if c.budget.Clock != nil {
		now = c.budget.Clock.Now()
	}
	for _, h := range held {
		ch <- prometheus.MustNewConstMetric(holdSeconds, prometheus.GaugeValue, now.Sub(h.Since).Seconds(), h.Scope)
	}
}

// invalidCollector is BudgetMetrics's collector of a nil or invalid
// Budget: its descriptor carries the error, which registration returns.
type invalidCollector struct {
	desc *prometheus.Desc
	err  error
}

func (c invalidCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c invalidCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(c.desc, c.err)
}

var (
	_ prometheus.Collector = (*budgetCollector)(nil)
	_ prometheus.Collector = invalidCollector{}
)

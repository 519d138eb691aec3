package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// managerEnv, set in a process's environment, makes it the manager
// (managerMain) instead of the command.
const managerEnv = "KUBERETRY_OPERATOR_MANAGER"

// The labels of the objects the manager reconciles, and the key of the
// data it copies.
const (
	workLabel = "lab.kuberetry.io/work"
	dataKey   = "n"
)

// managerMain is the manager's process: a controller-runtime manager with
// the README's recommended setup (the budget's three lines, unless
// --budget=false), leader election on, controller-runtime's default
// logger (zap, JSON, on standard error) and its metrics over HTTP. It
// returns the process's exit status: 1 when the manager stopped with an
// error (leader election lost), 0 when a signal stopped it.
func managerMain(args []string) int {
	flags := flag.NewFlagSet("manager", flag.ContinueOnError)
	ns := flags.String("namespace", "", "the namespace the manager watches and keeps its Lease in")
	withBudget := flags.Bool("budget", true, "the README's setup: NewBudget, LogHolds, BudgetMetrics, cfg.Wrap")
	metricsAddr := flags.String("metrics-bind-address", "", "the metrics server's address, host:port")
	lease := flags.String("lease", "", "the leader election's Lease name")
	leaseDuration := flags.Duration("lease-duration", 15*time.Second, "leader election's LeaseDuration")
	renewDeadline := flags.Duration("renew-deadline", 10*time.Second, "leader election's RenewDeadline")
	retryPeriod := flags.Duration("retry-period", 2*time.Second, "leader election's RetryPeriod")
	period := flags.Duration("period", time.Second, "each object is reconciled again this long after a reconcile that succeeded")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("setup")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "kubeconfig")
		return 1
	}
	// The lab's instrument, below the budget: the requests on the wire.
	wire := newWireCounter()
	metrics.Registry.MustRegister(wire.requests)
	cfg.Wrap(wire.wrap)
	mgr, err := setupManager(cfg, *withBudget, ctrl.Options{
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{*ns: {}}},
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		LeaderElection:          true,
		LeaderElectionID:        *lease,
		LeaderElectionNamespace: *ns,
		LeaseDuration:           leaseDuration,
		RenewDeadline:           renewDeadline,
		RetryPeriod:             retryPeriod,
	})
	if err != nil {
		log.Error(err, "new manager")
		return 1
	}
	r := &copyReconciler{Client: mgr.GetClient(), period: *period, errs: newErrorCounter()}
	metrics.Registry.MustRegister(r.errs)
	if err := r.SetupWithManager(mgr); err != nil {
		log.Error(err, "new controller")
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		return 1
	}
	return 0
}

// setupManager is the README's setupManager, the budget's lines kept or
// left out by withBudget, with the lab's options.
func setupManager(cfg *rest.Config, withBudget bool, opts ctrl.Options) (ctrl.Manager, error) {
	if withBudget {
		budget := retry.NewBudget()
		budget.OnHold = ctrlretry.LogHolds(ctrl.Log.WithName("retry"))
		metrics.Registry.MustRegister(ctrlretry.BudgetMetrics(budget))
		cfg.Wrap(budget.WrapTransport) // every request of the process, client-go's resends included
	}
	return ctrl.NewManager(cfg, opts)
}

// copyReconciler keeps, for each ConfigMap labelled workLabel, a
// ConfigMap named NAME-out holding its data key n and the time of the
// reconcile that wrote it (so that each reconcile writes), written with
// ctrlretry.CreateOrUpdate; it reconciles each object again period after
// a success, and returns ctrlretry.Result's verdict on an error.
type copyReconciler struct {
	client.Client
	period time.Duration
	errs   *prometheus.CounterVec
}

func (r *copyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var work corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &work); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: work.Namespace, Name: work.Name + "-out"}}
	_, err := ctrlretry.CreateOrUpdate(ctx, r.Client, out, func() error {
		out.Data = map[string]string{dataKey: work.Data[dataKey], "reconciled": time.Now().Format(time.RFC3339Nano)}
		return controllerutil.SetControllerReference(&work, out, r.Scheme())
	})
	if err != nil {
		r.errs.WithLabelValues(errorKind(err)).Inc()
		return ctrlretry.Result(err)
	}
	return reconcile.Result{RequeueAfter: r.period}, nil
}

func (r *copyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("copy").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[workLabel] != ""
		}))).
		Complete(r)
}

// errorKind names the kind of a reconcile's error for the lab's counter:
// budget (matches retry.ErrBudgetExhausted), probe (a probe of a held
// scope failed: its message names the hold), context, or other.
func errorKind(err error) string {
	switch {
	case errors.Is(err, retry.ErrBudgetExhausted):
		return "budget"
	case strings.Contains(err.Error(), "retry: probe of"):
		return "probe"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context"
	}
	return "other"
}

// newErrorCounter returns operator_lab_reconcile_errors_total{kind}.
func newErrorCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "operator_lab_reconcile_errors_total",
		Help: "The lab reconciler's errors, by kind (budget, probe, context, other).",
	}, []string{"kind"})
	for _, k := range []string{"budget", "probe", "context", "other"} {
		c.WithLabelValues(k)
	}
	return c
}

// wireCounter counts the requests that reach the wire, by kind: lease
// (coordination.k8s.io), watch, other.
type wireCounter struct{ requests *prometheus.CounterVec }

func newWireCounter() *wireCounter {
	c := &wireCounter{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "operator_lab_wire_requests_total",
		Help: "Requests sent on the wire, below the budget, by kind (lease, watch, other).",
	}, []string{"kind"})}
	for _, k := range []string{"lease", "watch", "other"} {
		c.requests.WithLabelValues(k)
	}
	return c
}

func (c *wireCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		kind := "other"
		switch {
		case strings.Contains(req.URL.Path, "/coordination.k8s.io/"):
			kind = "lease"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			kind = "watch"
		}
		c.requests.WithLabelValues(kind).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// managerArgs returns the manager's command line.
func managerArgs(ns string, withBudget bool, metricsAddr, lease string, le leaderTiming, period time.Duration) []string {
	return []string{
		"--period", period.String(),
		"--namespace", ns,
		"--budget=" + strconv.FormatBool(withBudget),
		"--metrics-bind-address", metricsAddr,
		"--lease", lease,
		"--lease-duration", le.lease.String(),
		"--renew-deadline", le.renew.String(),
		"--retry-period", le.retry.String(),
	}
}

// leaderTiming is the leader election's LeaseDuration, RenewDeadline and
// RetryPeriod.
type leaderTiming struct{ lease, renew, retry time.Duration }

func (l leaderTiming) String() string {
	return fmt.Sprintf("LeaseDuration %v, RenewDeadline %v, RetryPeriod %v", l.lease, l.renew, l.retry)
}

// exitIfManager runs managerMain and exits when this process is the
// manager.
func exitIfManager() {
	if os.Getenv(managerEnv) != "" {
		os.Exit(managerMain(os.Args[1:]))
	}
}

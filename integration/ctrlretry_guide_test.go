package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// The Go blocks of docs/controller-runtime.md, as written there
// (TestControllerRuntimeGuide holds them to it); TestCtrlretry/Guide runs
// them.

// WebReconciler keeps, for each ConfigMap labelled example.com/app, a
// Deployment of that name with the ConfigMap's replicas, owned by it.
type WebReconciler struct {
	client.Client
}

func (r *WebReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var settings corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &settings); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	app := settings.Labels["example.com/app"]
	if app == "" {
		return reconcile.Result{}, nil
	}
	replicas, err := strconv.Atoi(settings.Data["replicas"])
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("replicas: %w", err))
	}

	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: settings.Namespace, Name: app}}
	_, err = ctrlretry.CreateOrUpdate(ctx, r.Client, deploy, func() error {
		deploy.Spec.Replicas = ptr.To(int32(replicas))
		deploy.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		deploy.Spec.Template.Labels = map[string]string{"app": app}
		// Change the container in place: a new one would drop the fields
		// the apiserver defaulted, and every reconcile would write.
		if len(deploy.Spec.Template.Spec.Containers) == 0 {
			deploy.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web"}}
		}
		deploy.Spec.Template.Spec.Containers[0].Image = "nginx:1.27"
		return controllerutil.SetControllerReference(&settings, deploy, r.Scheme())
	})
	return ctrlretry.Result(err)
}

func (r *WebReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Complete(r)
}

// writeBudget is shared by every write of the process to this apiserver.
var writeBudget = retry.NewBudget()

func createOrUpdateWeb(ctx context.Context, mgr ctrl.Manager, deploy *appsv1.Deployment, mutate controllerutil.MutateFn) (controllerutil.OperationResult, error) {
	return ctrlretry.CreateOrUpdate(ctx, mgr.GetClient(), deploy, mutate,
		// Retries read the server itself, not the cache, which may lag.
		ctrlretry.WithReader(mgr.GetAPIReader()),
		ctrlretry.WithBackoff(retry.DefaultBackoff),
		ctrlretry.WithLoopOptions(retry.WithBudget(writeBudget)),
	)
}

// countingReconciler counts the reconciles r finished.
type countingReconciler struct {
	r    reconcile.Reconciler
	done atomic.Int64
}

func (c *countingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer c.done.Add(1)
	return c.r.Reconcile(ctx, req)
}

// testControllerRuntimeGuide runs the guide's reconciler in a manager: a
// ConfigMap's replicas become its Deployment's, created and then updated
// once, with no other write once it has converged (the reconcile that the
// reconciler's own write triggers finds nothing to change); then the
// guide's createOrUpdateWeb, with its options, changes the Deployment.
func testControllerRuntimeGuide(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "guide-")
	var wire reqcount.Counter
	mgr := newManager(t, wire.Config(s.Config), ns)
	web := &WebReconciler{Client: mgr.GetClient()}
	counted := &countingReconciler{r: web}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&appsv1.Deployment{}).Complete(counted); err != nil {
		t.Fatal(err)
	}
	// The guide's own setup, on a second manager that is never started.
	if err := web.SetupWithManager(newManager(t, s.Config, ns)); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)

	cms := s.Client.CoreV1().ConfigMaps(ns)
	settings, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"example.com/app": "web"}},
		Data:       map[string]string{"replicas": "2"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	converged := func(replicas int32) {
		t.Helper()
		var last *appsv1.Deployment
		err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
			d, err := s.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false
			}
			last = d
			return d.Spec.Replicas != nil && *d.Spec.Replicas == replicas && metav1.IsControlledBy(d, settings) && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27"
		})
		if err != nil {
			t.Fatalf("the Deployment did not get %d replicas: %v; last %v", replicas, err, last)
		}
		// Quiet: no reconcile for 300ms.
		for n := int64(-1); n != counted.done.Load(); {
			n = counted.done.Load()
			time.Sleep(300 * time.Millisecond)
		}
	}
	converged(2)
	settings.Data["replicas"] = "3"
	if settings, err = cms.Update(ctx, settings, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	converged(3)
	writes := wire.Outcomes().Of("deployments")
	t.Logf("%d reconciles; the manager's Deployment requests: %v", counted.done.Load(), writes)
	if writes["create 201"] != 1 || writes["update 200"] != 1 {
		t.Errorf("Deployment requests %v, want one create and one update that went through", writes)
	}

	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	op, err := createOrUpdateWeb(ctx, mgr, deploy, func() error {
		deploy.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		return nil
	})
	if err != nil || op != controllerutil.OperationResultUpdated || deploy.Spec.Template.Spec.Containers[0].Image != "nginx:1.28" {
		t.Errorf("createOrUpdateWeb: (%q, %v), image %s; want updated to nginx:1.28", op, err, deploy.Spec.Template.Spec.Containers[0].Image)
	}
}

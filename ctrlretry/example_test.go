package ctrlretry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// A reconciler's write: another writer creates the ConfigMap between
// CreateOrUpdate's Get and its Create, which controllerutil returns as
// AlreadyExists; ctrlretry reads it afresh and updates it.
func ExampleCreateOrUpdate() {
	ctx := context.Background()
	raced := false
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !raced { // the other writer
				raced = true
				other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"owner": "other"}}
				if err := c.Create(ctx, other); err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	op, err := ctrlretry.CreateOrUpdate(ctx, c, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["mode"] = "fast"
		return nil
	}, ctrlretry.WithLoopOptions(retry.WithSleeper(testclock.NewFakeClock(time.Now())))) // no real wait in the example
	fmt.Println(op, err)
	fmt.Println(cm.Data)
	// Output:
	// updated <nil>
	// map[mode:fast owner:other]
}

// CreateOrPatch sends a merge patch of the spec and one of the status, and
// says so, as controllerutil does.
func ExampleCreateOrPatch() {
	ctx := context.Background()
	stored := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	c := fake.NewClientBuilder().WithObjects(stored).WithStatusSubresource(stored).Build()

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	op, err := ctrlretry.CreateOrPatch(ctx, c, d, func() error {
		replicas := int32(3)
		d.Spec.Replicas = &replicas
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas = 3
		return nil
	})
	fmt.Println(op, err)
	// Output:
	// updatedStatus <nil>
}

// Result at the end of a Reconcile: a Conflict is a quiet requeue within a
// second, any other error goes to controller-runtime as it is.
func ExampleResult() {
	for _, err := range []error{
		nil,
		apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "settings", errors.New("the object has been modified")),
		fmt.Errorf("render: %w", context.DeadlineExceeded),
	} {
		res, err := ctrlretry.Result(err)
		fmt.Println(res.RequeueAfter > 0 && res.RequeueAfter <= time.Second, err)
	}
	// Output:
	// false <nil>
	// true <nil>
	// false render: context deadline exceeded
}

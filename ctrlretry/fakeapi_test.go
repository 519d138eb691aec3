package ctrlretry_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// hook runs before the n-th call (1-based) of one verb of a fakeClient,
// with the client underneath, which another writer uses to race. A non-nil
// error is returned instead of making the call.
type hook func(ctx context.Context, under client.WithWatch, obj client.Object, n int) error

// hooks are a fakeClient's hooks per verb.
type hooks struct {
	get, create, update, patch, statusPatch hook
}

// fakeClient is controller-runtime's fake client, recording each call it
// is given (not the other writer's) as "verb outcome", e.g. "get NotFound",
// "update ok", "patch status ok".
type fakeClient struct {
	client.WithWatch
	under client.WithWatch

	mu    sync.Mutex
	calls []string
	n     map[string]int
}

// newFake returns a fake client holding objs, with the status subresource
// of Deployments and ConfigMaps' lack of one as on a real apiserver.
func newFake(h hooks, objs ...client.Object) *fakeClient {
	under := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&appsv1.Deployment{}).Build()
	f := &fakeClient{under: under, n: map[string]int{}}
	f.WithWatch = interceptor.NewClient(under, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return f.call(ctx, "get", h.get, obj, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return f.call(ctx, "create", h.create, obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return f.call(ctx, "update", h.update, obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return f.call(ctx, "patch", h.patch, obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return f.call(ctx, "patch "+sub, h.statusPatch, obj, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	})
	return f
}

func (f *fakeClient) call(ctx context.Context, verb string, h hook, obj client.Object, do func() error) error {
	f.mu.Lock()
	f.n[verb]++
	n := f.n[verb]
	f.mu.Unlock()
	var err error
	if h != nil {
		err = h(ctx, f.under, obj, n)
	}
	if err == nil {
		err = do()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, verb+" "+outcome(err))
	return err
}

// Calls returns the calls made so far.
func (f *fakeClient) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// outcome is "ok", an API error's reason, or "error".
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return string(apierrors.ReasonForError(err))
	}
	return "error"
}

// objects builds the objects a fake client starts with; nil builds none.
type objects func() []client.Object

func (o objects) build() []client.Object {
	if o == nil {
		return nil
	}
	return o()
}

// stored returns the object named like obj from c's store, or nil.
func stored[T client.Object](t *testing.T, c client.Client, obj T, empty T) T {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), empty); err != nil {
		if apierrors.IsNotFound(err) {
			var zero T
			return zero
		}
		t.Fatal(err)
	}
	return empty
}

// A ConfigMap, and a Deployment as controllerutil's own tests build it.
const ns = "default"

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

var deploymentSpec = appsv1.DeploymentSpec{
	Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}},
	Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "busybox", Image: "busybox"}}},
	},
}

// Errors another writer's request gets.
var (
	configMaps       = schema.GroupResource{Resource: "configmaps"}
	quotas           = schema.GroupResource{Resource: "resourcequotas"}
	schemaNamespaces = schema.GroupResource{Resource: "namespaces"}
)

func conflictOf(name string) error {
	return apierrors.NewConflict(configMaps, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

func quotaConflict() error {
	return apierrors.NewConflict(quotas, "q", fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

func applyConflict(name string) error {
	err := apierrors.NewConflict(configMaps, name, fmt.Errorf("Apply failed with 1 conflict: conflict with \"other\": .data.k"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "other"`, Field: ".data.k"}}
	return err
}

// join is calls written as one string, for messages.
func join(calls []string) string { return "[" + strings.Join(calls, ", ") + "]" }

// testContext is t.Context (Go 1.24) for the module's Go 1.22 floor: a
// context cancelled when the test ends.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

package ctrlretry_test

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry/ctrlretry"
)

// Another writer's moves, each made once through the client underneath,
// before the call it hooks.
func otherCreates(ctx context.Context, under client.WithWatch, obj client.Object, n int) error {
	if n == 1 {
		return under.Create(ctx, configMap(obj.GetName(), map[string]string{"other": "x"}))
	}
	return nil
}

func otherUpdates(ctx context.Context, under client.WithWatch, obj client.Object, n int) error {
	if n != 1 {
		return nil
	}
	var cm corev1.ConfigMap
	if err := under.Get(ctx, client.ObjectKeyFromObject(obj), &cm); err != nil {
		return err
	}
	cm.Data["other"] = "x"
	delete(cm.Labels, "stored")
	return under.Update(ctx, &cm)
}

func otherDeletes(ctx context.Context, under client.WithWatch, obj client.Object, n int) error {
	if n == 1 {
		return under.Delete(ctx, configMap(obj.GetName(), nil))
	}
	return nil
}

func failsOnce(err error) hook {
	return func(_ context.Context, _ client.WithWatch, _ client.Object, n int) error {
		if n == 1 {
			return err
		}
		return nil
	}
}

// storedConfigMap is the ConfigMap "cm" the race cases start from; the
// caller's seed carries a label of its own.
func storedConfigMap() []client.Object {
	cm := configMap("cm", map[string]string{"k": "old"})
	cm.Labels = map[string]string{"stored": "yes"}
	return []client.Object{cm}
}

func seedConfigMap() client.Object {
	cm := configMap("cm", nil)
	cm.Labels = map[string]string{"seed": "yes"}
	return cm
}

// setK is the MutateFn of the race cases.
func setK(obj client.Object) controllerutil.MutateFn {
	return func() error {
		cm := obj.(*corev1.ConfigMap)
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["k"] = "v"
		return nil
	}
}

// TestRaces makes another writer get in between controllerutil's read and
// write: controllerutil returns the race's error, ctrlretry retries it
// from the caller's obj and a fresh read and succeeds.
func TestRaces(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		pair     int // index in pairs
		existing objects
		h        hooks
		isErr    func(error) bool // controllerutil's error
		op       controllerutil.OperationResult
		calls    []string
		data     map[string]string
		labels   map[string]string
	}{
		{name: "another writer creates it first", pair: 0, h: hooks{create: otherCreates}, isErr: apierrors.IsAlreadyExists,
			op:    controllerutil.OperationResultUpdated,
			calls: []string{"get NotFound", "create AlreadyExists", "get ok", "update ok"},
			data:  map[string]string{"other": "x", "k": "v"}},
		{name: "another writer updates it in between", pair: 0, existing: storedConfigMap, h: hooks{update: otherUpdates}, isErr: apierrors.IsConflict,
			op:     controllerutil.OperationResultUpdated,
			calls:  []string{"get ok", "update Conflict", "get ok", "update ok"},
			data:   map[string]string{"other": "x", "k": "v"},
			labels: map[string]string{}},
		{name: "quota admission's Conflict on create", pair: 0, h: hooks{create: failsOnce(quotaConflict())}, isErr: apierrors.IsConflict,
			op:     controllerutil.OperationResultCreated,
			calls:  []string{"get NotFound", "create Conflict", "get NotFound", "create ok"},
			data:   map[string]string{"k": "v"},
			labels: map[string]string{"seed": "yes"}},
		{name: "another writer deletes it before the update", pair: 0, existing: storedConfigMap, h: hooks{update: otherDeletes}, isErr: apierrors.IsNotFound,
			op:     controllerutil.OperationResultCreated,
			calls:  []string{"get ok", "update NotFound", "get NotFound", "create ok"},
			data:   map[string]string{"k": "v"},
			labels: map[string]string{"seed": "yes"}},
		{name: "another writer creates it first", pair: 1, h: hooks{create: otherCreates}, isErr: apierrors.IsAlreadyExists,
			op:    controllerutil.OperationResultUpdated,
			calls: []string{"get NotFound", "create AlreadyExists", "get ok", "patch ok"},
			data:  map[string]string{"other": "x", "k": "v"}},
		{name: "another writer deletes it before the patch", pair: 1, existing: storedConfigMap, h: hooks{patch: otherDeletes}, isErr: apierrors.IsNotFound,
			op:     controllerutil.OperationResultCreated,
			calls:  []string{"get ok", "patch NotFound", "get NotFound", "create ok"},
			data:   map[string]string{"k": "v"},
			labels: map[string]string{"seed": "yes"}},
		{name: "a Conflict from the patch", pair: 1, existing: storedConfigMap, h: hooks{patch: failsOnce(conflictOf("cm"))}, isErr: apierrors.IsConflict,
			op:     controllerutil.OperationResultUpdated,
			calls:  []string{"get ok", "patch Conflict", "get ok", "patch ok"},
			data:   map[string]string{"k": "v"},
			labels: map[string]string{"stored": "yes"}},
	}
	for _, c := range cases {
		p := pairs[c.pair]
		t.Run(p.name+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			fc := newFake(c.h, c.existing.build()...)
			obj := seedConfigMap()
			if _, err := p.original(testContext(t), fc, obj, setK(obj)); !c.isErr(err) {
				t.Fatalf("controllerutil.%s returned %v: the case races nothing controllerutil returns", p.name, err)
			}

			fc = newFake(c.h, c.existing.build()...)
			obj = seedConfigMap()
			in := newInstant()
			op, err := p.retrying(in.option())(testContext(t), fc, obj, setK(obj))
			if err != nil || op != c.op {
				t.Fatalf("returned (%q, %v), want (%q, nil)", op, err, c.op)
			}
			if calls := fc.Calls(); !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("calls %s, want %s", join(calls), join(c.calls))
			}
			if in.attempts != 2 || len(in.waits) != 1 {
				t.Errorf("%d attempts, waits %v; want 2 attempts, one wait", in.attempts, in.waits)
			}
			got := stored(t, fc.under, configMap("cm", nil), &corev1.ConfigMap{})
			if got == nil {
				t.Fatal("nothing stored")
			}
			if !reflect.DeepEqual(got.Data, c.data) || len(got.Labels)+len(c.labels) > 0 && !reflect.DeepEqual(got.Labels, c.labels) {
				t.Errorf("stored data %v, labels %v; want %v, %v", got.Data, got.Labels, c.data, c.labels)
			}
			// obj holds the object as stored, as after controllerutil's
			// success.
			cm := obj.(*corev1.ConfigMap)
			if cm.ResourceVersion != got.ResourceVersion || !reflect.DeepEqual(cm.Data, got.Data) || !reflect.DeepEqual(cm.Labels, got.Labels) {
				t.Errorf("obj is %v, the stored object %v", cm, got)
			}
		})
	}
}

// TestUnstructuredRetry: the reset copy of an unstructured obj keeps its
// kind, so the create after a NotFound from the update knows what to
// create.
func TestUnstructuredRetry(t *testing.T) {
	t.Parallel()
	fc := newFake(hooks{update: otherDeletes}, storedConfigMap()...)
	obj := unstructuredConfigMap("cm")
	op, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, func() error {
		return unstructured.SetNestedField(obj.Object, "v", "data", "k")
	}, newInstant().option())
	if err != nil || op != controllerutil.OperationResultCreated {
		t.Fatalf("returned (%q, %v), want created", op, err)
	}
	want := []string{"get ok", "update NotFound", "get NotFound", "create ok"}
	if calls := fc.Calls(); !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %s, want %s", join(calls), join(want))
	}
	got := stored(t, fc.under, configMap("cm", nil), &corev1.ConfigMap{})
	if got == nil || !reflect.DeepEqual(got.Data, map[string]string{"k": "v"}) || len(got.Labels) != 0 {
		t.Errorf("stored %v, want data k=v and no label of the deleted object", got)
	}
	if obj.GetKind() != "ConfigMap" || obj.GetResourceVersion() != got.ResourceVersion {
		t.Errorf("obj has kind %q, resourceVersion %q; want ConfigMap, %q", obj.GetKind(), obj.GetResourceVersion(), got.ResourceVersion)
	}
}

package ctrlretry_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry/ctrlretry"
)

// operation is CreateOrUpdate or CreateOrPatch, of controllerutil or of
// ctrlretry.
type operation func(context.Context, client.Client, client.Object, controllerutil.MutateFn) (controllerutil.OperationResult, error)

// pairs are the functions ctrlretry replaces, each with its replacement.
var pairs = []struct {
	name     string
	original operation
	retrying func(...ctrlretry.Option) operation
}{
	{"CreateOrUpdate", controllerutil.CreateOrUpdate, func(opts ...ctrlretry.Option) operation {
		return func(ctx context.Context, c client.Client, obj client.Object, f controllerutil.MutateFn) (controllerutil.OperationResult, error) {
			return ctrlretry.CreateOrUpdate(ctx, c, obj, f, opts...)
		}
	}},
	{"CreateOrPatch", controllerutil.CreateOrPatch, func(opts ...ctrlretry.Option) operation {
		return func(ctx context.Context, c client.Client, obj client.Object, f controllerutil.MutateFn) (controllerutil.OperationResult, error) {
			return ctrlretry.CreateOrPatch(ctx, c, obj, f, opts...)
		}
	}},
}

// dropInCase is a call where nothing races: the cases of controllerutil's
// own tests and a few more.
type dropInCase struct {
	name     string
	existing objects
	obj      func() client.Object
	mutate   func(obj client.Object) controllerutil.MutateFn // nil: a nil MutateFn
	h        hooks
}

func existingDeployment() []client.Object {
	d := deployment("d")
	d.Spec = *deploymentSpec.DeepCopy()
	return []client.Object{d}
}

func existingDeploymentWithStatus() []client.Object {
	objs := existingDeployment()
	objs[0].(*appsv1.Deployment).Status = appsv1.DeploymentStatus{Replicas: 1}
	return objs
}

func deploy(f func(d *appsv1.Deployment) error) func(client.Object) controllerutil.MutateFn {
	return func(obj client.Object) controllerutil.MutateFn {
		return func() error { return f(obj.(*appsv1.Deployment)) }
	}
}

func replicas(n int32) *int32 { return &n }

var dropInCases = []dropInCase{
	{name: "creates an absent object", obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error { d.Spec = *deploymentSpec.DeepCopy(); return nil })},
	{name: "nil MutateFn creates", obj: func() client.Object { return deployment("d") }},
	{name: "updates an existing object", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error { d.Spec.Replicas = replicas(2); return nil })},
	{name: "leaves an unchanged object", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(*appsv1.Deployment) error { return nil })},
	{name: "nil MutateFn leaves an existing object", existing: existingDeployment, obj: func() client.Object { return deployment("d") }},
	{name: "status only", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error {
			d.Status = appsv1.DeploymentStatus{ReadyReplicas: 1, Replicas: 3}
			return nil
		})},
	{name: "spec and status", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error {
			d.Spec.Replicas = replicas(3)
			d.Status = appsv1.DeploymentStatus{ReadyReplicas: 1, Replicas: 3}
			return nil
		})},
	{name: "spec and a status that was not empty", existing: existingDeploymentWithStatus, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error {
			d.Spec.Replicas = replicas(5)
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "True"}}
			return nil
		})},
	{name: "renames on creation", obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error { d.Spec = *deploymentSpec.DeepCopy(); d.Name += "-1"; return nil })},
	{name: "renames an existing object", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error { d.Name += "-1"; return nil })},
	{name: "moves an existing object to another namespace", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(d *appsv1.Deployment) error { d.Namespace += "-1"; return nil })},
	{name: "get fails", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(*appsv1.Deployment) error { panic("MutateFn called after a failed get") }),
		h: hooks{get: func(context.Context, client.WithWatch, client.Object, int) error {
			return errors.New("unexpected error")
		}}},
	{name: "MutateFn fails", existing: existingDeployment, obj: func() client.Object { return deployment("d") },
		mutate: deploy(func(*appsv1.Deployment) error { return errors.New("mutate failed") })},
	{name: "unstructured object created", obj: func() client.Object { return unstructuredConfigMap("u") },
		mutate: func(obj client.Object) controllerutil.MutateFn {
			return func() error {
				return unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, "v", "data", "k")
			}
		}},
	{name: "unstructured object updated", existing: func() []client.Object { return []client.Object{configMap("u", map[string]string{"k": "old"})} },
		obj: func() client.Object { return unstructuredConfigMap("u") },
		mutate: func(obj client.Object) controllerutil.MutateFn {
			return func() error {
				return unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, "v", "data", "k")
			}
		}},
}

func unstructuredConfigMap(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// outcome of one call: what it returned, did, and left.
type dropInOutcome struct {
	op     controllerutil.OperationResult
	err    string
	calls  []string
	obj    client.Object
	stored []client.Object
}

func runDropIn(t *testing.T, c dropInCase, op operation) dropInOutcome {
	t.Helper()
	fc := newFake(c.h, c.existing.build()...)
	obj := c.obj()
	var f controllerutil.MutateFn
	if c.mutate != nil {
		f = c.mutate(obj)
	}
	res, err := op(testContext(t), fc, obj, f)
	out := dropInOutcome{op: res, calls: fc.Calls(), obj: obj}
	if err != nil {
		out.err = err.Error()
	}
	for _, name := range []string{"d", "d-1"} {
		if got := stored(t, fc.under, deployment(name), &appsv1.Deployment{}); got != nil {
			out.stored = append(out.stored, got)
		}
	}
	if got := stored(t, fc.under, configMap("u", nil), &corev1.ConfigMap{}); got != nil {
		out.stored = append(out.stored, got)
	}
	return out
}

// panicsOnNilMutateFn reports whether op panics when given a nil MutateFn,
// as controllerutil.CreateOrUpdate did before controller-runtime v0.21:
// there ctrlretry is compared with controllerutil given a MutateFn that
// changes nothing.
func panicsOnNilMutateFn(t *testing.T, op operation) (panicked bool) {
	t.Helper()
	defer func() { panicked = recover() != nil }()
	_, _ = op(testContext(t), newFake(hooks{}), deployment("d"), nil)
	return false
}

// TestDropIn runs each call that meets no race through controllerutil and
// through ctrlretry, on fake clients holding the same objects: the same
// result, error, calls, obj and stored objects.
func TestDropIn(t *testing.T) {
	t.Parallel()
	for _, p := range pairs {
		for _, c := range dropInCases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ref := c
				if c.mutate == nil && panicsOnNilMutateFn(t, p.original) {
					// Before v0.21 controllerutil calls a nil MutateFn;
					// ctrlretry takes it as a MutateFn that changes nothing,
					// as v0.21 and later do.
					ref.mutate = func(client.Object) controllerutil.MutateFn { return func() error { return nil } }
				}
				want := runDropIn(t, ref, p.original)
				in := newInstant()
				got := runDropIn(t, c, p.retrying(in.option()))
				if got.op != want.op || got.err != want.err {
					t.Errorf("returned (%q, %q), controllerutil (%q, %q)", got.op, got.err, want.op, want.err)
				}
				if !reflect.DeepEqual(got.calls, want.calls) {
					t.Errorf("calls %s, controllerutil's %s", join(got.calls), join(want.calls))
				}
				if !reflect.DeepEqual(got.obj, want.obj) {
					t.Errorf("obj is\n%v\ncontrollerutil left\n%v", got.obj, want.obj)
				}
				if !reflect.DeepEqual(got.stored, want.stored) {
					t.Errorf("stored\n%v\ncontrollerutil stored\n%v", got.stored, want.stored)
				}
				if in.attempts != 1 || len(in.waits) != 0 {
					t.Errorf("%d attempts and waits %v, want 1 attempt and no wait", in.attempts, in.waits)
				}
			})
		}
	}
}

// TestReadsBeforeWriting holds ctrlretry to the rule of every write loop:
// the object written is the one read, changed by f, never obj as the
// caller built it or a stale copy of it, so another writer's key in the
// stored ConfigMap survives. (controllerutil reads into obj first.)
func TestReadsBeforeWriting(t *testing.T) {
	t.Parallel()
	for _, p := range pairs {
		for name, obj := range map[string]func() *corev1.ConfigMap{
			"a built obj": func() *corev1.ConfigMap { return configMap("cm", map[string]string{"k": "mine"}) },
			"a stale copy with a resourceVersion": func() *corev1.ConfigMap {
				cm := configMap("cm", map[string]string{"k": "old"})
				cm.ResourceVersion = "1"
				return cm
			},
		} {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				existing := configMap("cm", map[string]string{"k": "old", "other": "theirs"})
				fc := newFake(hooks{}, existing)
				cm := obj()
				f := func() error { cm.Data["k"] = "mine"; return nil }
				in := newInstant()
				res, err := p.retrying(in.option())(context.Background(), fc, cm, f)
				if err != nil || res != controllerutil.OperationResultUpdated {
					t.Fatalf("returned (%q, %v), want (%q, nil)", res, err, controllerutil.OperationResultUpdated)
				}
				write := "update ok"
				if p.name == "CreateOrPatch" {
					write = "patch ok"
				}
				if want := []string{"get ok", write}; !reflect.DeepEqual(fc.Calls(), want) {
					t.Errorf("calls %s, want %s", join(fc.Calls()), join(want))
				}
				got := stored(t, fc.under, existing, &corev1.ConfigMap{})
				if want := map[string]string{"k": "mine", "other": "theirs"}; !reflect.DeepEqual(got.Data, want) {
					t.Errorf("stored data %v, want %v: the other writer's key kept", got.Data, want)
				}
			})
		}
	}
}

// mergingReader decodes the stored object into obj without clearing obj
// first, as the real client's JSON decoding does: a map key that obj has
// and the stored object lacks stays.
type mergingReader struct{ under client.Reader }

func (r mergingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var cm corev1.ConfigMap
	if err := r.under.Get(ctx, key, &cm, opts...); err != nil {
		return err
	}
	data, err := json.Marshal(&cm)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}

func (r mergingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.under.List(ctx, list, opts...)
}

// mergingClient is a client whose Get merges as mergingReader's does.
type mergingClient struct{ client.WithWatch }

func (c mergingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return mergingReader{c.WithWatch}.Get(ctx, key, obj, opts...)
}

// TestRetryStartsFromCallersObj: through a reader that decodes into obj
// as the real client does, a retry writes what a fresh call of
// controllerutil writes on the store as the other writer left it, not a
// label of the earlier read that the other writer removed.
func TestRetryStartsFromCallersObj(t *testing.T) {
	t.Parallel()
	existing := func() []client.Object {
		cm := configMap("cm", map[string]string{"k": "old"})
		cm.Labels = map[string]string{"stored": "yes", "gone": "yes"}
		return []client.Object{cm}
	}
	removeGone := func(ctx context.Context, under client.WithWatch, obj client.Object, n int) error {
		if n != 1 {
			return nil
		}
		var cm corev1.ConfigMap
		if err := under.Get(ctx, client.ObjectKeyFromObject(obj), &cm); err != nil {
			return err
		}
		delete(cm.Labels, "gone")
		return under.Update(ctx, &cm)
	}
	fc := newFake(hooks{update: removeGone}, existing()...)
	obj := seedConfigMap()
	if _, err := ctrlretry.CreateOrUpdate(testContext(t), mergingClient{fc}, obj, setK(obj), ctrlretry.WithReader(mergingReader{fc.under}), newInstant().option()); err != nil {
		t.Fatal(err)
	}
	got := stored(t, fc.under, configMap("cm", nil), &corev1.ConfigMap{})

	// controllerutil's one call on the store as the race left it.
	fresh := newFake(hooks{}, existing()...)
	if err := removeGone(testContext(t), fresh.under, configMap("cm", nil), 1); err != nil {
		t.Fatal(err)
	}
	seed := seedConfigMap()
	if _, err := controllerutil.CreateOrUpdate(testContext(t), mergingClient{fresh}, seed, setK(seed)); err != nil {
		t.Fatal(err)
	}
	want := stored(t, fresh.under, configMap("cm", nil), &corev1.ConfigMap{})
	if !reflect.DeepEqual(got.Labels, want.Labels) || !reflect.DeepEqual(got.Data, want.Data) {
		t.Errorf("stored labels %v, data %v; a fresh controllerutil call stores %v, %v", got.Labels, got.Data, want.Labels, want.Data)
	}
	if _, ok := got.Labels["gone"]; ok {
		t.Error("the retry wrote back the label another writer removed")
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

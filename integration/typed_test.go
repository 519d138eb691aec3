package integration_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// client-go's generated typed clients have the method sets the typed
// forms take, namespaced and cluster-scoped kinds alike.
var (
	_ retry.EnsureClient[*corev1.ConfigMap]                   = corev1client.ConfigMapInterface(nil)
	_ retry.PatchClient[*corev1.ConfigMap]                    = corev1client.ConfigMapInterface(nil)
	_ retry.EnsureClient[*corev1.Secret]                      = corev1client.SecretInterface(nil)
	_ retry.EnsureClient[*corev1.Service]                     = corev1client.ServiceInterface(nil)
	_ retry.UpdateStatusClient[*corev1.Pod]                   = corev1client.PodInterface(nil)
	_ retry.UpdateStatusClient[*corev1.Namespace]             = corev1client.NamespaceInterface(nil)
	_ retry.UpdateStatusClient[*corev1.Node]                  = corev1client.NodeInterface(nil)
	_ retry.EnsureClient[*appsv1.Deployment]                  = appsv1client.DeploymentInterface(nil)
	_ retry.UpdateStatusClient[*appsv1.Deployment]            = appsv1client.DeploymentInterface(nil)
	_ retry.PatchClient[*appsv1.StatefulSet]                  = appsv1client.StatefulSetInterface(nil)
	_ retry.UpdateStatusClient[*batchv1.Job]                  = batchv1client.JobInterface(nil)
	_ retry.EnsureClient[*coordinationv1.Lease]               = coordinationv1client.LeaseInterface(nil)
	_ retry.UpdateStatusClient[*corev1.ResourceQuota]         = corev1client.ResourceQuotaInterface(nil)
	_ retry.UpdateClient[*corev1.ServiceAccount]              = corev1client.ServiceAccountInterface(nil)
	_ retry.UpdateStatusClient[*corev1.PersistentVolumeClaim] = corev1client.PersistentVolumeClaimInterface(nil)
)

// The Quick start proposed for the README, typed form first: each
// function's body is a block as it would stand there.

// quickStartEnsure is the typed form: one call, one mutate function.
func quickStartEnsure(ctx context.Context, client kubernetes.Interface, ns, name string) (*corev1.ConfigMap, retry.Result, error) {
	desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	cm, result, err := retry.Ensure(ctx, retry.DefaultRetry, client.CoreV1().ConfigMaps(ns), desired,
		func(cm *corev1.ConfigMap) error { // the stored object or a copy of desired: change it
			metav1.SetMetaDataLabel(&cm.ObjectMeta, "example.com/phase", "ready")
			return nil
		})
	// result: retry.ResultCreated, ResultUpdated, or ResultUnchanged (the label was there: no write)
	return cm, result, err
}

// quickStartUpdate changes an object from an informer's lister: no read
// unless a Conflict says the cache was stale.
func quickStartUpdate(ctx context.Context, client kubernetes.Interface, cached *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	cm, err := retry.Update(ctx, retry.DefaultRetry, client.CoreV1().ConfigMaps(cached.Namespace), cached,
		func(cm *corev1.ConfigMap) error { // a copy: the cache is never touched
			cm.Data = map[string]string{"mode": "fast"}
			return nil
		})
	return cm, err
}

// quickStartDynamic is the closure form, for a client whose methods the
// typed forms' interfaces do not fit: here the dynamic client.
func quickStartDynamic(ctx context.Context, dyn dynamic.Interface, ns, name string) (*unstructured.Unstructured, retry.Result, error) {
	cms := dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns)
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}}}

	cm, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired,
		func(ctx context.Context) (*unstructured.Unstructured, error) { // NotFound: create
			return cms.Get(ctx, name, metav1.GetOptions{})
		},
		func(cm *unstructured.Unstructured) error { // change the copy it is given
			return unstructured.SetNestedField(cm.Object, "ready", "metadata", "labels", "example.com/phase")
		},
		func(ctx context.Context, cm *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return cms.Create(ctx, cm, metav1.CreateOptions{})
		},
		func(ctx context.Context, cm *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return cms.Update(ctx, cm, metav1.UpdateOptions{})
		})
	return cm, result, err
}

// TestTypedWrites runs the typed-client writes against one apiserver,
// counting what they send on the wire, each subtest in namespaces of its
// own: the proposed Quick start, Ensure from a built object and from a
// stored copy, a Patch raced by another writer that keeps a field its
// client's Go type does not know, a write with an attempt timeout through
// a server that stalls, and creates through two kube-apiservers on one
// etcd prefix with a ResourceQuota.
func TestTypedWrites(t *testing.T) {
	s := startServer(t)
	w := newWriteEnv(t, s.Config)
	t.Run("QuickStart", func(t *testing.T) { testTypedQuickStart(t, s, w) })
	t.Run("Ensure", func(t *testing.T) { testEnsure(t, w) })
	t.Run("Patch", func(t *testing.T) { testTypedPatch(t, s, w) })
	t.Run("AttemptTimeout", func(t *testing.T) { testAttemptTimeout(t, s) })
	t.Run("QuotaTwoAPIServers", func(t *testing.T) { testQuotaTwoAPIServers(t, s) })
}

func testTypedQuickStart(t *testing.T, s *testserver.Server, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "typed-quickstart-")
	createdThenUnchanged(t, w, "Ensure", func() (*corev1.ConfigMap, retry.Result, error) {
		return quickStartEnsure(ctx, w.client, ns, "app")
	})

	cached, err := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got *corev1.ConfigMap
	wantRequests(t, "Update from a stored copy", w.requests("configmaps", func() { got, err = quickStartUpdate(ctx, w.client, cached) }),
		map[string]int{"update 200": 1})
	if err != nil || got.Data["mode"] != "fast" || cached.Data != nil {
		t.Errorf("Update: %v, data %v, the cached copy's %v; want mode fast, the cache untouched", err, got.Data, cached.Data)
	}

	var wire reqcount.Counter
	dyn, err := dynamic.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []retry.Result{retry.ResultCreated, retry.ResultUnchanged} {
		cm, result, err := quickStartDynamic(ctx, dyn, ns, "dynamic")
		if err != nil || result != want || cm.GetLabels()["example.com/phase"] != "ready" {
			t.Errorf("dynamic CreateOrUpdate: %s, %v; want %s and the label", result, err, want)
		}
	}
	t.Logf("dynamic CreateOrUpdate, created then unchanged: %s", wire.Outcomes())
	if got := wire.Outcomes().String(); got != "create configmaps 201: 1, get configmaps 200: 1, get configmaps 404: 1" {
		t.Errorf("dynamic CreateOrUpdate: requests %s", got)
	}
}

// testEnsure runs Ensure from a built object and from a stored copy
// through every path, and counts each call's requests on the wire.
func testEnsure(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "ensure-typed-")
	cms := w.client.CoreV1().ConfigMaps(ns)
	built := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"app": "web"}}}
	}
	set := func(mode string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"mode": mode}; return nil }
	}
	var stored *corev1.ConfigMap // what the last call returned, as a cache would hold it
	steps := []struct {
		what   string
		obj    func() *corev1.ConfigMap
		mode   string
		result retry.Result
		wire   map[string]int
		before func()
	}{
		{"built, absent", built, "a", retry.ResultCreated, map[string]int{"get 404": 1, "create 201": 1}, nil},
		{"built, as wanted", built, "a", retry.ResultUnchanged, map[string]int{"get 200": 1}, nil},
		{"built, changed", built, "b", retry.ResultUpdated, map[string]int{"get 200": 1, "update 200": 1}, nil},
		{"stored, as wanted", func() *corev1.ConfigMap { return stored }, "b", retry.ResultUnchanged, map[string]int{}, nil},
		{"stored, changed", func() *corev1.ConfigMap { return stored }, "c", retry.ResultUpdated, map[string]int{"update 200": 1}, nil},
		{"stored, stale", func() *corev1.ConfigMap { return stored }, "d", retry.ResultUpdated,
			map[string]int{"update 409": 1, "get 200": 1, "update 200": 1}, func() {
				if _, err := w.admin.CoreV1().ConfigMaps(ns).Patch(ctx, "settings", types.MergePatchType, []byte(`{"metadata":{"annotations":{"other":"x"}}}`), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
		{"stored, deleted meanwhile", func() *corev1.ConfigMap { return stored }, "e", retry.ResultCreated,
			map[string]int{"update 404": 1, "get 404": 1, "create 201": 1}, func() {
				if err := w.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		obj := st.obj()
		snapshot := obj.DeepCopyObject()
		var got *corev1.ConfigMap
		var result retry.Result
		var err error
		wantRequests(t, st.what, w.requests("configmaps", func() { got, result, err = retry.Ensure(ctx, retry.DefaultRetry, cms, obj, set(st.mode)) }), st.wire)
		if err != nil || result != st.result {
			t.Fatalf("%s: %s, %v; want %s", st.what, result, err, st.result)
		}
		if !equalObjects(snapshot, obj) {
			t.Errorf("%s: Ensure modified obj", st.what)
		}
		live, err := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if live.Data["mode"] != st.mode || live.Labels["app"] != "web" || live.ResourceVersion != got.ResourceVersion {
			t.Errorf("%s: the server holds data %v, labels %v at %s; want mode %s, app=web, Ensure's object (%s)",
				st.what, live.Data, live.Labels, live.ResourceVersion, st.mode, got.ResourceVersion)
		}
		stored = got
	}
}

func equalObjects(a, b runtime.Object) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// oldConfigMap is a ConfigMap as a client's Go type knows it that predates
// binaryData (Kubernetes 1.10): what a client built against an older API
// sees of a newer server's object.
type oldConfigMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
}

func (c *oldConfigMap) DeepCopyObject() runtime.Object {
	out := &oldConfigMap{TypeMeta: c.TypeMeta, Data: maps.Clone(c.Data)}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// oldConfigMaps is a typed client of oldConfigMaps in one namespace, on a
// REST client: the generated client of that older API, as far as the
// typed forms use it.
type oldConfigMaps struct {
	rc rest.Interface
	ns string
}

func (c oldConfigMaps) decode(raw []byte, err error) (*oldConfigMap, error) {
	if err != nil {
		return nil, err
	}
	out := &oldConfigMap{}
	return out, json.Unmarshal(raw, out)
}

// json sets req to send and accept JSON, where the clientset's REST
// client would ask for protobuf.
func (c oldConfigMaps) json(req *rest.Request) *rest.Request {
	return req.SetHeader("Accept", "application/json").Namespace(c.ns).Resource("configmaps")
}

func (c oldConfigMaps) Get(ctx context.Context, name string, _ metav1.GetOptions) (*oldConfigMap, error) {
	return c.decode(c.json(c.rc.Get()).Name(name).Do(ctx).Raw())
}

func (c oldConfigMaps) Update(ctx context.Context, cm *oldConfigMap, _ metav1.UpdateOptions) (*oldConfigMap, error) {
	body, err := json.Marshal(cm)
	if err != nil {
		return nil, err
	}
	return c.decode(c.json(c.rc.Put()).SetHeader("Content-Type", "application/json").Name(cm.Name).Body(body).Do(ctx).Raw())
}

func (c oldConfigMaps) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, subresources ...string) (*oldConfigMap, error) {
	return c.decode(c.json(c.rc.Patch(pt)).Name(name).SubResource(subresources...).Body(data).Do(ctx).Raw())
}

// testTypedPatch: another writer changes the ConfigMap between Patch's
// read and its patch, and the ConfigMap carries binaryData, which the
// patching client's Go type does not know. The lock refuses the first
// patch, the retry reads afresh and patches; the other writer's change
// and binaryData are kept. Update through the same client drops
// binaryData, as any update of the decoded object does.
func testTypedPatch(t *testing.T, s *testserver.Server, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "patch-typed-")
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app"},
		"data": map[string]any{"a": "1"}, "binaryData": map[string]any{"blob": "AAEC"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := oldConfigMaps{rc: w.client.CoreV1().RESTClient(), ns: ns}
	w.before("patch", "configmaps", func() { // the other writer, between the read and the patch
		if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"data":{"b":"2"}}`), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	var got *oldConfigMap
	wantRequests(t, "Patch raced by another writer", w.requests("configmaps", func() {
		got, err = retry.Patch(ctx, retry.DefaultRetry, old, &oldConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}},
			func(cm *oldConfigMap) error { cm.Data["c"] = "3"; return nil })
	}), map[string]int{"get 200": 2, "patch 409": 1, "patch 200": 1})
	if err != nil {
		t.Fatal(err)
	}
	binaryData := func() map[string]any {
		live, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bd, _, _ := unstructured.NestedMap(live.Object, "binaryData")
		return bd
	}
	want := map[string]string{"a": "1", "b": "2", "c": "3"}
	bd := binaryData()
	t.Logf("after Patch: data %v, binaryData %v", got.Data, bd)
	if !maps.Equal(got.Data, want) || bd["blob"] != "AAEC" {
		t.Errorf("after Patch: data %v, binaryData %v; want %v and binaryData kept", got.Data, bd, want)
	}

	// The same race through client-go's own typed client.
	w.before("patch", "configmaps", func() {
		if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"data":{"e":"5"}}`), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	var cm *corev1.ConfigMap
	wantRequests(t, "Patch through corev1client raced by another writer", w.requests("configmaps", func() {
		cm, err = retry.Patch(ctx, retry.DefaultRetry, w.client.CoreV1().ConfigMaps(ns), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}},
			func(cm *corev1.ConfigMap) error { cm.Data["f"] = "6"; return nil })
	}), map[string]int{"get 200": 2, "patch 409": 1, "patch 200": 1})
	if err != nil || cm.Data["e"] != "5" || cm.Data["f"] != "6" || len(cm.BinaryData["blob"]) != 3 {
		t.Fatalf("Patch through corev1client: %v, data %v, binaryData %v", err, cm.Data, cm.BinaryData)
	}
	got.ResourceVersion = "" // a built object again: Update reads it first

	// Update sends the object as this client's type decoded it.
	if _, err := retry.Update(ctx, retry.DefaultRetry, old, got, func(cm *oldConfigMap) error { cm.Data["d"] = "4"; return nil }); err != nil {
		t.Fatal(err)
	}
	bd = binaryData()
	t.Logf("after Update through the same client: binaryData %v", bd)
	if len(bd) != 0 {
		t.Errorf("after Update: binaryData %v; an update of the decoded object was expected to drop it", bd)
	}
}

package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// The guide docs/writes.md shows one function per write a controller
// makes, in its section "Every write". Each is in this file as it is there
// (TestGuideGoBlocks checks it), and TestWrites/EveryWrite runs each
// against the real apiserver.

// setPhase labels a ConfigMap taken from an informer's cache.
func setPhase(ctx context.Context, cms corev1client.ConfigMapInterface, cached *corev1.ConfigMap, phase string) (*corev1.ConfigMap, error) {
	return retry.UpdateOnConflict(ctx, retry.DefaultRetry, cached,
		func(ctx context.Context) (*corev1.ConfigMap, error) { // after a Conflict: read afresh
			return cms.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(cm *corev1.ConfigMap) error { // a copy: the cache is never touched
			metav1.SetMetaDataLabel(&cm.ObjectMeta, "example.com/phase", phase)
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Update(ctx, cm, metav1.UpdateOptions{})
		})
}

// ensureSettings makes owner's settings ConfigMap exist and hold want.
func ensureSettings(ctx context.Context, cms corev1client.ConfigMapInterface, owner *corev1.ConfigMap, want map[string]string) (retry.Result, error) {
	desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-settings", Namespace: owner.Namespace}}
	_, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired,
		func(ctx context.Context) (*corev1.ConfigMap, error) { // NotFound: create
			return cms.Get(ctx, desired.Name, metav1.GetOptions{})
		},
		func(cm *corev1.ConfigMap) error { // the stored object, or a copy of desired
			cm.Data = maps.Clone(want)
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Create(ctx, cm, metav1.CreateOptions{})
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Update(ctx, cm, metav1.UpdateOptions{})
		})
	return result, err // created, updated, or unchanged (nothing sent but the GET)
}

// markObserved records in a Deployment's status that its spec was seen.
func markObserved(ctx context.Context, deps appsv1client.DeploymentInterface, cached *appsv1.Deployment) (*appsv1.Deployment, error) {
	return retry.UpdateOnConflict(ctx, retry.DefaultRetry, cached,
		func(ctx context.Context) (*appsv1.Deployment, error) {
			return deps.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(d *appsv1.Deployment) error { // status only: UpdateStatus drops everything else
			d.Status.ObservedGeneration = d.Generation
			setCondition(&d.Status, appsv1.DeploymentProgressing, corev1.ConditionTrue, "Observed")
			return nil
		},
		func(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
			return deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		})
}

// setCondition sets a condition's status and reason, and its times only when
// they change: a metav1.Now() on every call would make every call a write.
func setCondition(s *appsv1.DeploymentStatus, typ appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range s.Conditions {
		if c := &s.Conditions[i]; c.Type == typ {
			if c.Status != status || c.Reason != reason {
				c.Status, c.Reason, c.LastUpdateTime, c.LastTransitionTime = status, reason, now, now
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{
		Type: typ, Status: status, Reason: reason, LastUpdateTime: now, LastTransitionTime: now})
}

// annotateKeyCount records how many keys a ConfigMap's data has, with a
// merge patch that the server refuses if the ConfigMap changed since it was read.
func annotateKeyCount(ctx context.Context, cms corev1client.ConfigMapInterface, name string) error {
	return retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(ctx context.Context) error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{}) // every attempt reads afresh
		if err != nil {
			return err
		}
		count := strconv.Itoa(len(cm.Data))
		if cm.Annotations["example.com/keys"] == count {
			return nil // nothing to write
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": cm.ResourceVersion, // the lock: 409 Conflict if it changed
			"annotations":     map[string]string{"example.com/keys": count},
		}})
		if err != nil {
			return err
		}
		_, err = cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// applySettings applies the fields this controller owns with Server-Side Apply.
func applySettings(ctx context.Context, cms corev1client.ConfigMapInterface, ns, name string, data map[string]string) (*corev1.ConfigMap, error) {
	cm, err := retry.OnErrorValue(ctx, retry.DefaultBackoff, retry.IsTransient, // a failing apiserver only
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			return cms.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(data),
				metav1.ApplyOptions{FieldManager: "example-controller"})
		})
	if retry.IsApplyConflict(err) { // another manager owns a field: the same apply can never succeed
		return nil, fmt.Errorf("apply %s/%s: drop the field or force it: %w", ns, name, err)
	}
	return cm, err
}

// deleteIfUnused deletes a ConfigMap unless it is labelled in use, and only
// the very version it checked.
func deleteIfUnused(ctx context.Context, cms corev1client.ConfigMapInterface, name string) (deleted bool, err error) {
	err = retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(ctx context.Context) error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{}) // every attempt checks afresh
		if apierrors.IsNotFound(err) {
			return nil // already gone
		}
		if err != nil {
			return err
		}
		if cm.Labels["example.com/in-use"] == "true" {
			return nil
		}
		err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: &cm.UID, ResourceVersion: &cm.ResourceVersion, // 409 Conflict if it changed
		}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		deleted = err == nil
		return err
	})
	return deleted, err
}

// quickStart is the README's Quick start, as a function body (one tab
// deeper, which TestGuideGoBlocks allows for).
func quickStart(ctx context.Context, client kubernetes.Interface, ns, name string) (*corev1.ConfigMap, retry.Result, error) {
	cms := client.CoreV1().ConfigMaps(ns)
	desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}

	cm, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired,
		func(ctx context.Context) (*corev1.ConfigMap, error) { // NotFound: create
			return cms.Get(ctx, name, metav1.GetOptions{})
		},
		func(cm *corev1.ConfigMap) error { // change the copy it is given
			metav1.SetMetaDataLabel(&cm.ObjectMeta, "example.com/phase", "ready")
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Create(ctx, cm, metav1.CreateOptions{})
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Update(ctx, cm, metav1.UpdateOptions{})
		})
	// result: retry.ResultCreated, ResultUpdated, or ResultUnchanged (the label was there: no write);
	// cm is the object as the server stored it
	return cm, result, err
}

// testEveryWrite runs each of the "Every write" functions against
// the real apiserver and counts what it sends on the wire, and measures the
// traps that section names.
func testEveryWrite(t *testing.T, s *testserver.Server) {
	w := newWriteEnv(t, s.Config)
	t.Run("QuickStart", func(t *testing.T) { testQuickStart(t, w) })
	t.Run("Update", func(t *testing.T) { testSetPhase(t, w) })
	t.Run("CreateOrUpdate", func(t *testing.T) { testEnsureSettings(t, w) })
	t.Run("Status", func(t *testing.T) { testMarkObserved(t, w) })
	t.Run("MergePatchWithLock", func(t *testing.T) { testAnnotateKeyCount(t, w) })
	t.Run("ServerSideApply", func(t *testing.T) { testApplySettings(t, w) })
	t.Run("DeleteWithPreconditions", func(t *testing.T) { testDeleteIfUnused(t, w) })
}

// writeEnv is a namespace per subtest and clients whose requests are
// counted by verb, resource and status, with a hook that can run a
// competing write just before a chosen request.
type writeEnv struct {
	base    *rest.Config
	wire    *reqcount.Counter
	counted *rest.Config         // client's: counted, hooked
	client  kubernetes.Interface // counted, hooked
	admin   kubernetes.Interface // neither: the competing writer

	mu   sync.Mutex
	hook map[reqcount.Key]func() // run once, before the next such request
}

func newWriteEnv(t *testing.T, cfg *rest.Config) *writeEnv {
	w := &writeEnv{base: cfg, wire: &reqcount.Counter{}, hook: map[reqcount.Key]func(){}}
	counted := w.wire.Config(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			k := reqcount.Classify(req)
			w.mu.Lock()
			f := w.hook[k]
			delete(w.hook, k)
			w.mu.Unlock()
			if f != nil {
				f()
			}
			return rt.RoundTrip(req)
		})
	})
	w.counted = counted
	var err error
	if w.client, err = kubernetes.NewForConfig(counted); err != nil {
		t.Fatal(err)
	}
	if w.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return w
}

// roundTripperFunc is a transport that is a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// before runs f once, just before the next request of verb to resource
// goes out.
func (w *writeEnv) before(verb, resource string, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hook[reqcount.Key{Verb: verb, Resource: resource}] = f
}

// namespace creates a namespace for t.
func (w *writeEnv) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := w.admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// sent returns the requests of verb to resource answered with code (-1:
// any) during f.
func (w *writeEnv) sent(verb, resource string, code int, f func()) int {
	before := w.wire.Outcomes().Status(verb, resource, code)
	f()
	return w.wire.Outcomes().Status(verb, resource, code) - before
}

// requests returns every request to resource that f sent, as
// "verb code" -> count.
func (w *writeEnv) requests(resource string, f func()) map[string]int {
	before := w.wire.Outcomes().Of(resource)
	f()
	out := w.wire.Outcomes().Of(resource)
	for k, n := range before {
		if out[k] -= n; out[k] == 0 {
			delete(out, k)
		}
	}
	return out
}

func wantRequests(t *testing.T, what string, got, want map[string]int) {
	t.Helper()
	t.Logf("%s: %v", what, got)
	if !maps.Equal(got, want) {
		t.Errorf("%s: requests %v, want %v", what, got, want)
	}
}

func testQuickStart(t *testing.T, w *writeEnv) {
	ns := w.namespace(t, "quickstart-")
	createdThenUnchanged(t, w, "quick start", func() (*corev1.ConfigMap, retry.Result, error) {
		return quickStart(t.Context(), w.client, ns, "app")
	})
}

// createdThenUnchanged calls write twice: the first call must create the
// ConfigMap with the label example.com/phase=ready (a GET 404, a POST), the
// second find it so (a GET).
func createdThenUnchanged(t *testing.T, w *writeEnv, what string, write func() (*corev1.ConfigMap, retry.Result, error)) {
	t.Helper()
	for _, want := range []struct {
		result retry.Result
		wire   map[string]int
	}{
		{retry.ResultCreated, map[string]int{"get 404": 1, "create 201": 1}},
		{retry.ResultUnchanged, map[string]int{"get 200": 1}},
	} {
		var cm *corev1.ConfigMap
		var result retry.Result
		var err error
		wantRequests(t, what+", "+string(want.result), w.requests("configmaps", func() { cm, result, err = write() }), want.wire)
		if err != nil || result != want.result || cm.Labels["example.com/phase"] != "ready" {
			t.Errorf("%s: %s, %v, labels %v; want %s and the label", what, result, err, cm.Labels, want.result)
		}
	}
}

func testSetPhase(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "update-")
	lister := startInformer(t, ctx, w.admin, ns)
	if _, err := w.admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var cached *corev1.ConfigMap
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool { var err error; cached, err = lister.Get("app"); return err == nil }); err != nil {
		t.Fatal(err)
	}
	cms := w.client.CoreV1().ConfigMaps(ns)
	var got *corev1.ConfigMap
	var err error
	wantRequests(t, "fresh cached object", w.requests("configmaps", func() { got, err = setPhase(ctx, cms, cached, "ready") }),
		map[string]int{"update 200": 1})
	if err != nil || got.Labels["example.com/phase"] != "ready" {
		t.Fatalf("setPhase: %v, labels %v", err, got.Labels)
	}
	if _, ok := cached.Labels["example.com/phase"]; ok {
		t.Error("setPhase modified the informer's object")
	}
	// Stale: the cached object is now behind the server.
	wantRequests(t, "stale cached object", w.requests("configmaps", func() { got, err = setPhase(ctx, cms, cached, "done") }),
		map[string]int{"update 409": 1, "get 200": 1, "update 200": 1})
	if err != nil || got.Labels["example.com/phase"] != "done" {
		t.Fatalf("setPhase from a stale object: %v, labels %v", err, got.Labels)
	}
	wantRequests(t, "no change", w.requests("configmaps", func() { _, err = setPhase(ctx, cms, got, "done") }), map[string]int{})
	if err != nil {
		t.Fatal(err)
	}
}

func testEnsureSettings(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "ensure-")
	owner, err := w.admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := w.client.CoreV1().ConfigMaps(ns)
	steps := []struct {
		what   string
		want   map[string]string
		result retry.Result
		wire   map[string]int
		before func() // a competing write just before the call's first request
	}{
		{"absent", map[string]string{"mode": "a"}, retry.ResultCreated, map[string]int{"get 404": 1, "create 201": 1}, nil},
		{"as wanted", map[string]string{"mode": "a"}, retry.ResultUnchanged, map[string]int{"get 200": 1}, nil},
		{"changed", map[string]string{"mode": "b"}, retry.ResultUpdated, map[string]int{"get 200": 1, "update 200": 1}, nil},
		{"deleted before the update", map[string]string{"mode": "c"}, retry.ResultCreated,
			map[string]int{"get 200": 1, "update 404": 1, "get 404": 1, "create 201": 1}, func() {
				w.before("update", "configmaps", func() {
					if err := w.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "app-settings", metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
				})
			}},
		{"created by another writer after the GET", map[string]string{"mode": "d"}, retry.ResultUpdated,
			map[string]int{"get 404": 1, "create 409": 1, "get 200": 1, "update 200": 1}, func() {
				if err := w.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "app-settings", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				w.before("create", "configmaps", func() {
					if _, err := w.admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings"},
						Data: map[string]string{"mode": "other"}}, metav1.CreateOptions{}); err != nil {
						t.Error(err)
					}
				})
			}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		var result retry.Result
		wantRequests(t, st.what, w.requests("configmaps", func() { result, err = ensureSettings(ctx, cms, owner, st.want) }), st.wire)
		if err != nil || result != st.result {
			t.Errorf("%s: %s, %v; want %s", st.what, result, err, st.result)
		}
		live, err := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, "app-settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(live.Data, st.want) || !metav1.IsControlledBy(live, owner) {
			t.Errorf("%s: the server holds %v, controlled by the owner: %v; want %v", st.what, live.Data, metav1.IsControlledBy(live, owner), st.want)
		}
	}
}

func testMarkObserved(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "status-")
	deps := w.client.AppsV1().Deployments(ns)
	d, err := w.admin.AppsV1().Deployments(ns).Create(ctx, testDeployment("web", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got *appsv1.Deployment
	wantRequests(t, "status write", w.requests("deployments", func() { got, err = markObserved(ctx, deps, d) }), map[string]int{"update 200": 1})
	if err != nil || got.Status.ObservedGeneration != d.Generation || len(got.Status.Conditions) != 1 {
		t.Fatalf("markObserved: %v, status %+v", err, got.Status)
	}
	wantRequests(t, "status already right", w.requests("deployments", func() { got, err = markObserved(ctx, deps, got) }), map[string]int{})
	if err != nil {
		t.Fatal(err)
	}

	// The traps, measured.
	status := func() appsv1.DeploymentStatus {
		live, err := w.admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return live.Status
	}
	write := func(mutate func(*appsv1.Deployment), update func(context.Context, *appsv1.Deployment) (*appsv1.Deployment, error)) (*appsv1.Deployment, error) {
		return retry.UpdateOnConflict(ctx, retry.DefaultRetry, (*appsv1.Deployment)(nil),
			func(ctx context.Context) (*appsv1.Deployment, error) {
				return deps.Get(ctx, "web", metav1.GetOptions{})
			},
			func(d *appsv1.Deployment) error { mutate(d); return nil }, update)
	}
	byUpdate := func(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
		return deps.Update(ctx, d, metav1.UpdateOptions{})
	}
	byUpdateStatus := func(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
		return deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	}

	// Update drops a status change: nil error, one PUT, the status as it was.
	var n int
	n = w.sent("update", "deployments", 200, func() {
		_, err = write(func(d *appsv1.Deployment) { d.Status.Replicas = 7 }, byUpdate)
	})
	t.Logf("Update with a status change: %d PUT, err %v, stored status.replicas %d", n, err, status().Replicas)
	if err != nil || n != 1 || status().Replicas != 0 {
		t.Errorf("Update with a status change: %v, %d PUTs, status.replicas %d; want nil, 1 and the change dropped", err, n, status().Replicas)
	}
	// UpdateStatus drops a label and a spec change.
	n = w.sent("update", "deployments", 200, func() {
		_, err = write(func(d *appsv1.Deployment) {
			metav1.SetMetaDataLabel(&d.ObjectMeta, "example.com/phase", "ready")
			d.Spec.Replicas = ptr.To[int32](5)
			d.Status.Replicas = 2
		}, byUpdateStatus)
	})
	live, lerr := w.admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if lerr != nil {
		t.Fatal(lerr)
	}
	t.Logf("UpdateStatus with a label, spec and status change: %d PUT, err %v; stored labels %v, replicas %d, status.replicas %d",
		n, err, live.Labels, *live.Spec.Replicas, live.Status.Replicas)
	if err != nil || n != 1 || live.Labels["example.com/phase"] != "" || *live.Spec.Replicas != 1 || live.Status.Replicas != 2 {
		t.Errorf("UpdateStatus: want the status kept and the label and spec dropped; got labels %v, replicas %d, status.replicas %d", live.Labels, *live.Spec.Replicas, live.Status.Replicas)
	}
	// A timestamp set on every call: every call writes.
	const calls = 3
	n = w.sent("update", "deployments", 200, func() {
		for range calls {
			_, err = write(func(d *appsv1.Deployment) {
				for i := range d.Status.Conditions {
					d.Status.Conditions[i].LastUpdateTime = metav1.Now()
				}
			}, byUpdateStatus)
		}
	})
	t.Logf("metav1.Now() in mutate: %d calls, %d PUTs", calls, n)
	if err != nil || n != calls {
		t.Errorf("metav1.Now() in mutate: %d calls sent %d PUTs (%v), want one each", calls, n, err)
	}
	// setCondition's way: only the first of as many calls writes.
	n = w.sent("update", "deployments", 200, func() {
		for range calls {
			_, err = write(func(d *appsv1.Deployment) {
				setCondition(&d.Status, appsv1.DeploymentAvailable, corev1.ConditionTrue, "Ready")
			}, byUpdateStatus)
		}
	})
	t.Logf("setCondition: %d calls, %d PUTs", calls, n)
	if err != nil || n != 1 {
		t.Errorf("setCondition: %d calls sent %d PUTs (%v), want 1", calls, n, err)
	}
}

func testAnnotateKeyCount(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "patch-")
	cms := w.client.CoreV1().ConfigMaps(ns)
	if _, err := w.admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	wantRequests(t, "merge patch", w.requests("configmaps", func() { err = annotateKeyCount(ctx, cms, "app") }),
		map[string]int{"get 200": 1, "patch 200": 1})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer adds a key between the read and the patch: the lock
	// refuses the count read before it, the retry counts again.
	w.before("patch", "configmaps", func() {
		if _, err := w.admin.CoreV1().ConfigMaps(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"data":{"b":"2","c":"3"}}`), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	if _, err := w.admin.CoreV1().ConfigMaps(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"data":{"z":"0"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, "merge patch raced", w.requests("configmaps", func() { err = annotateKeyCount(ctx, cms, "app") }),
		map[string]int{"get 200": 2, "patch 409": 1, "patch 200": 1})
	live, lerr := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil || lerr != nil || live.Annotations["example.com/keys"] != strconv.Itoa(len(live.Data)) {
		t.Errorf("after the race: %v, %v, annotation %q for %d keys", err, lerr, live.Annotations["example.com/keys"], len(live.Data))
	}
}

func testApplySettings(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "apply-")
	cms := w.client.CoreV1().ConfigMaps(ns)
	var err error
	wantRequests(t, "apply", w.requests("configmaps", func() { _, err = applySettings(ctx, cms, ns, "app", map[string]string{"mode": "a"}) }),
		map[string]int{"patch 201": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.CoreV1().ConfigMaps(ns).Apply(ctx, corev1ac.ConfigMap("app", ns).WithData(map[string]string{"owner": "other"}),
		metav1.ApplyOptions{FieldManager: "other-controller"}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, "apply of another manager's field", w.requests("configmaps", func() {
		_, err = applySettings(ctx, cms, ns, "app", map[string]string{"mode": "a", "owner": "me"})
	}), map[string]int{"patch 409": 1})
	if !retry.IsApplyConflict(err) || !strings.Contains(err.Error(), "drop the field or force it") {
		t.Errorf("apply of another manager's field: %v, want the wrapped apply conflict", err)
	}
}

func testDeleteIfUnused(t *testing.T, w *writeEnv) {
	ctx := t.Context()
	ns := w.namespace(t, "delete-")
	cms := w.client.CoreV1().ConfigMaps(ns)
	mk := func(name string, labels map[string]string) {
		if _, err := w.admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(name string) bool {
		_, err := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	mk("unused", nil)
	mk("used", map[string]string{"example.com/in-use": "true"})
	mk("raced", nil)
	var deleted bool
	var err error
	wantRequests(t, "unused", w.requests("configmaps", func() { deleted, err = deleteIfUnused(ctx, cms, "unused") }), map[string]int{"get 200": 1, "delete 200": 1})
	if err != nil || !deleted || exists("unused") {
		t.Errorf("unused: deleted %v, %v, still there %v", deleted, err, exists("unused"))
	}
	wantRequests(t, "in use", w.requests("configmaps", func() { deleted, err = deleteIfUnused(ctx, cms, "used") }), map[string]int{"get 200": 1})
	if err != nil || deleted || !exists("used") {
		t.Errorf("in use: deleted %v, %v, still there %v", deleted, err, exists("used"))
	}
	// Marked in use between the check and the delete: the precondition
	// refuses the delete, the retry sees the label.
	w.before("delete", "configmaps", func() {
		if _, err := w.admin.CoreV1().ConfigMaps(ns).Patch(ctx, "raced", types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/in-use":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	wantRequests(t, "marked in use during the delete", w.requests("configmaps", func() { deleted, err = deleteIfUnused(ctx, cms, "raced") }),
		map[string]int{"get 200": 2, "delete 409": 1})
	if err != nil || deleted || !exists("raced") {
		t.Errorf("raced: deleted %v, %v, still there %v", deleted, err, exists("raced"))
	}
}

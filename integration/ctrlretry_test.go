package integration_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// TestCtrlretry runs ctrlretry beside controllerutil on one apiserver: the
// cases of controllerutil's own tests through both (same results, same
// requests), the races controllerutil returns and ctrlretry retries (through
// the server and through a cache), 16 writers through a manager's cached
// client, and the controller-runtime guide's reconciler. The races and the
// cached writers run with controller-runtime's read-your-writes consistency
// off and on.
func TestCtrlretry(t *testing.T) {
	s := startServer(t)
	t.Run("ControllerutilCases", func(t *testing.T) { testControllerutilCases(t, s) })
	t.Run("Races", func(t *testing.T) {
		for _, m := range crClients {
			t.Run(m.name, func(t *testing.T) { testCtrlretryRaces(t, s, m) })
		}
	})
	t.Run("CachedWriters", func(t *testing.T) {
		for _, m := range crClients {
			if m.cached {
				t.Run(m.name, func(t *testing.T) { testCachedWriters(t, s, m) })
			}
		}
	})
	t.Run("Guide", func(t *testing.T) { testControllerRuntimeGuide(t, s) })
}

// crClient is how a controller-runtime client reads: from the server, or
// from a cache, with or without controller-runtime's read-your-writes
// consistency (client.CacheOptions.EnableReadYourWritesConsistency: a read
// from the cache waits until it holds the client's own writes).
type crClient struct {
	name                   string
	cached, readYourWrites bool
}

var crClients = []crClient{
	{name: "Uncached"},
	{name: "Cached", cached: true},
	{name: "CachedReadYourWrites", cached: true, readYourWrites: true},
}

// cacheOptions are a client's options for m's cache, read from reader.
func (m crClient) cacheOptions(reader client.Reader) *client.CacheOptions {
	return &client.CacheOptions{Reader: reader, EnableReadYourWritesConsistency: ptr.To(m.readYourWrites)}
}

// consistencyWaits returns how many reads controller-runtime's
// read-your-writes client has made wait (its wait histogram's count, in
// the process's controller-runtime registry).
func consistencyWaits(t *testing.T) uint64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == "controller_runtime_client_consistency_wait_duration_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// checkConsistencyWaits fails t unless the reads since before went through
// the read-your-writes client exactly when m has it on.
func (m crClient) checkConsistencyWaits(t *testing.T, before uint64) {
	t.Helper()
	reads := consistencyWaits(t) - before
	t.Logf("%d reads through the read-your-writes client", reads)
	if m.readYourWrites != (reads > 0) {
		t.Errorf("%d reads through the read-your-writes client; read-your-writes on: %v", reads, m.readYourWrites)
	}
}

// startCache starts a cache of every namespace on cfg, stopped when t
// ends, with its ConfigMap informer synced.
func startCache(t *testing.T, cfg *rest.Config) cache.Cache {
	t.Helper()
	c, err := cache.New(cfg, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(true)); err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitCached returns once reader holds obj at its resourceVersion.
func awaitCached(t *testing.T, ctx context.Context, reader client.Reader, obj client.Object) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := reader.Get(ctx, client.ObjectKeyFromObject(obj), &cm)
		return err == nil && cm.ResourceVersion == obj.GetResourceVersion(), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the cache never held %s at resourceVersion %s: %v", obj.GetName(), obj.GetResourceVersion(), err)
	}
}

// crOperation is CreateOrUpdate or CreateOrPatch, of controllerutil or of
// ctrlretry (with no options).
type crOperation func(context.Context, client.Client, client.Object, controllerutil.MutateFn) (controllerutil.OperationResult, error)

// crOperations are controllerutil's functions, each with ctrlretry's.
var crOperations = []struct {
	name                string
	controllerutil, ctr crOperation
}{
	{"CreateOrUpdate", controllerutil.CreateOrUpdate, func(ctx context.Context, c client.Client, obj client.Object, f controllerutil.MutateFn) (controllerutil.OperationResult, error) {
		return ctrlretry.CreateOrUpdate(ctx, c, obj, f)
	}},
	{"CreateOrPatch", controllerutil.CreateOrPatch, func(ctx context.Context, c client.Client, obj client.Object, f controllerutil.MutateFn) (controllerutil.OperationResult, error) {
		return ctrlretry.CreateOrPatch(ctx, c, obj, f)
	}},
}

// The MutateFns of controllerutil's tests (controllerutil_test.go of
// controller-runtime v0.25.3), on the Deployment they are given.
type deploymentMutation func(d *appsv1.Deployment) controllerutil.MutateFn

var (
	specr = func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error {
			d.Spec = appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "busybox", Image: "busybox"}}},
				},
			}
			return nil
		}
	}
	identity = func(*appsv1.Deployment) controllerutil.MutateFn { return func() error { return nil } }
	renamer  = func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error { d.Name = fmt.Sprintf("%s-1", d.Name); return nil }
	}
	namespaceChanger = func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error { d.Namespace = fmt.Sprintf("%s-1", d.Namespace); return nil }
	}
	statusr = func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error { d.Status = appsv1.DeploymentStatus{ReadyReplicas: 1, Replicas: 3}; return nil }
	}
	noMutateFn deploymentMutation // a nil MutateFn, which controllerutil allows
)

func scaler(n int32) deploymentMutation {
	return func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error { d.Spec.Replicas = &n; return nil }
	}
}

// all runs fs in order.
func all(fs ...deploymentMutation) deploymentMutation {
	return func(d *appsv1.Deployment) controllerutil.MutateFn {
		return func() error {
			for _, f := range fs {
				if err := f(d)(); err != nil {
					return err
				}
			}
			return nil
		}
	}
}

// notFailingGet is the MutateFn of the tests whose get fails: it must not run.
func notFailingGet(*appsv1.Deployment) controllerutil.MutateFn {
	return func() error { return fmt.Errorf("MutateFn ran after a failed get") }
}

// errorReader is the client of controllerutil's tests whose Get fails.
type errorReader struct{ client.Client }

func (errorReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("unexpected error")
}

// cuStep is one call of a controllerutil test case, on the case's
// Deployment, with what that test expects.
type cuStep struct {
	f       deploymentMutation
	failGet bool // through errorReader
	want    controllerutil.OperationResult
	wantErr bool
}

// cuCase is a test case of controllerutil's, as its calls. local is the
// test's assertLocalDeployWasUpdated: after the calls, obj holds the
// stored object's resourceVersion, spec and status.
type cuCase struct {
	name  string
	steps []cuStep
	local bool
}

var (
	createStep = cuStep{f: specr, want: controllerutil.OperationResultCreated}
	cuCommon   = []cuCase{
		{name: "creates a new object if one doesn't exists", steps: []cuStep{createStep}},
		{name: "errors when MutateFn changes object name on creation", steps: []cuStep{{f: all(specr, renamer), want: controllerutil.OperationResultNone, wantErr: true}}},
		{name: "errors when MutateFn renames an object", steps: []cuStep{createStep, {f: renamer, want: controllerutil.OperationResultNone, wantErr: true}}},
		{name: "errors when object namespace changes", steps: []cuStep{createStep, {f: namespaceChanger, want: controllerutil.OperationResultNone, wantErr: true}}},
		{name: "aborts immediately if there was an error initially retrieving the object", steps: []cuStep{{f: notFailingGet, failGet: true, want: controllerutil.OperationResultNone, wantErr: true}}},
		// Not in controllerutil's tests: a nil MutateFn, on an existing
		// object and on an absent one (which the apiserver refuses: a
		// Deployment needs a spec).
		{name: "nil MutateFn on an existing object", steps: []cuStep{createStep, {f: noMutateFn, want: controllerutil.OperationResultNone}}},
		{name: "nil MutateFn on an absent object", steps: []cuStep{{f: noMutateFn, want: controllerutil.OperationResultNone, wantErr: true}}},
	}
	cuCases = map[string][]cuCase{
		"CreateOrUpdate": append([]cuCase{
			{name: "updates existing object", steps: []cuStep{createStep, {f: scaler(2), want: controllerutil.OperationResultUpdated}}},
			{name: "updates only changed objects", steps: []cuStep{createStep, {f: identity, want: controllerutil.OperationResultNone}}},
		}, cuCommon...),
		"CreateOrPatch": append([]cuCase{
			{name: "patches existing object", steps: []cuStep{createStep, {f: scaler(2), want: controllerutil.OperationResultUpdated}}, local: true},
			{name: "patches only changed objects", steps: []cuStep{createStep, {f: identity, want: controllerutil.OperationResultNone}}, local: true},
			{name: "patches only changed status", steps: []cuStep{createStep, {f: statusr, want: controllerutil.OperationResultUpdatedStatusOnly}}, local: true},
			{name: "patches resource and status", steps: []cuStep{createStep, {f: all(scaler(3), statusr), want: controllerutil.OperationResultUpdatedStatus}}, local: true},
			{name: "patches resource and not empty status", steps: []cuStep{createStep,
				{f: all(scaler(3), statusr), want: controllerutil.OperationResultUpdatedStatus},
				{f: all(scaler(5), func(d *appsv1.Deployment) controllerutil.MutateFn {
					return func() error {
						d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue}}
						return nil
					}
				}), want: controllerutil.OperationResultUpdatedStatus}}, local: true},
		}, cuCommon...),
	}
)

// cuRun is what one implementation did in a case: per call, the result,
// the error's text and the requests on the wire; then obj and the
// stored object.
type cuRun struct {
	results  []controllerutil.OperationResult
	errs     []string
	requests []map[string]int
	obj      *appsv1.Deployment
	stored   *appsv1.Deployment // nil: none
}

func runCase(t *testing.T, w *writeEnv, c client.Client, ns, name string, op crOperation, cs cuCase) cuRun {
	t.Helper()
	ctx := t.Context()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	var run cuRun
	for _, step := range cs.steps {
		var f controllerutil.MutateFn
		if step.f != nil {
			f = step.f(d)
		}
		cl := c
		if step.failGet {
			cl = errorReader{c}
		}
		var res controllerutil.OperationResult
		var err error
		run.requests = append(run.requests, w.requests("deployments", func() { res, err = op(ctx, cl, d, f) }))
		run.results = append(run.results, res)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		run.errs = append(run.errs, msg)
	}
	run.obj = d
	var stored appsv1.Deployment
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &stored); {
	case err == nil:
		run.stored = &stored
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	return run
}

// testControllerutilCases ports the CreateOrUpdate and CreateOrPatch cases
// of controllerutil's own tests and runs each through controllerutil and
// through ctrlretry, each on a Deployment of its own (same name, another
// namespace): the results those
// tests expect, the same results and error texts from both, the same
// requests on the wire per call (verb and status), the same spec and
// status stored and left in obj.
func testControllerutilCases(t *testing.T, s *testserver.Server) {
	w := newWriteEnv(t, s.Config)
	c, err := client.New(w.counted, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The same names in two namespaces, for the same error texts.
	nsControllerutil, nsCtrlretry := w.namespace(t, "controllerutil-"), w.namespace(t, "ctrlretry-")
	totals := map[string]map[string]int{"controllerutil": {}, "ctrlretry": {}}
	n := 0
	for _, op := range crOperations {
		for _, cs := range cuCases[op.name] {
			n++
			t.Run(op.name+"/"+cs.name, func(t *testing.T) {
				name := fmt.Sprintf("d-%d", n)
				want := runCase(t, w, c, nsControllerutil, name, op.controllerutil, cs)
				got := runCase(t, w, c, nsCtrlretry, name, op.ctr, cs)
				for i, step := range cs.steps {
					if want.results[i] != step.want || (want.errs[i] != "") != step.wantErr {
						t.Errorf("call %d: controllerutil returned (%q, %q), its test expects %q (error %v): the port is wrong", i+1, want.results[i], want.errs[i], step.want, step.wantErr)
					}
					if got.results[i] != want.results[i] || got.errs[i] != want.errs[i] {
						t.Errorf("call %d: ctrlretry returned (%q, %q), controllerutil (%q, %q)", i+1, got.results[i], got.errs[i], want.results[i], want.errs[i])
					}
					if !maps.Equal(got.requests[i], want.requests[i]) {
						t.Errorf("call %d: ctrlretry sent %v, controllerutil %v", i+1, got.requests[i], want.requests[i])
					}
					for k, v := range got.requests[i] {
						totals["ctrlretry"][k] += v
					}
					for k, v := range want.requests[i] {
						totals["controllerutil"][k] += v
					}
				}
				if (got.stored == nil) != (want.stored == nil) {
					t.Fatalf("stored: ctrlretry %v, controllerutil %v", got.stored != nil, want.stored != nil)
				}
				if got.stored != nil && (!equality.Semantic.DeepEqual(got.stored.Spec, want.stored.Spec) || !equality.Semantic.DeepEqual(got.stored.Status, want.stored.Status)) {
					t.Errorf("stored spec and status differ:\nctrlretry      %v\n%v\ncontrollerutil %v\n%v", got.stored.Spec, got.stored.Status, want.stored.Spec, want.stored.Status)
				}
				if !equality.Semantic.DeepEqual(got.obj.Spec, want.obj.Spec) || !equality.Semantic.DeepEqual(got.obj.Status, want.obj.Status) {
					t.Errorf("obj's spec and status differ:\nctrlretry      %v\n%v\ncontrollerutil %v\n%v", got.obj.Spec, got.obj.Status, want.obj.Spec, want.obj.Status)
				}
				if cs.local {
					for impl, r := range map[string]cuRun{"controllerutil": want, "ctrlretry": got} {
						if r.obj.ResourceVersion != r.stored.ResourceVersion || !equality.Semantic.DeepEqual(r.obj.Spec, r.stored.Spec) || !equality.Semantic.DeepEqual(r.obj.Status, r.stored.Status) {
							t.Errorf("%s: obj (resourceVersion %s) is not the stored object (%s)", impl, r.obj.ResourceVersion, r.stored.ResourceVersion)
						}
					}
				}
			})
		}
	}
	t.Logf("%d cases; Deployment requests of all their calls: controllerutil %v, ctrlretry %v", n, totals["controllerutil"], totals["ctrlretry"])
}

// crRace is another writer's move just before one request of the call.
type crRace struct {
	name     string
	op       int  // index in crOperations
	existing bool // the ConfigMap exists, labelled stored and gone
	verb     string
	other    func(ctx context.Context, cms typedConfigMaps) error
	isErr    func(error) bool // what controllerutil returns
	want     controllerutil.OperationResult
	wire     map[string]int // ctrlretry's requests
	data     map[string]string
	labels   map[string]string
}

// typedConfigMaps is the other writer's client.
type typedConfigMaps interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func otherCreates(ctx context.Context, cms typedConfigMaps) error {
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"other": "x"}}, metav1.CreateOptions{})
	return err
}

// otherUpdates removes the label gone and sets other.
func otherUpdates(ctx context.Context, cms typedConfigMaps) error {
	cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		return err
	}
	delete(cm.Labels, "gone")
	cm.Data["other"] = "x"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

func otherDeletes(ctx context.Context, cms typedConfigMaps) error {
	return cms.Delete(ctx, "cm", metav1.DeleteOptions{})
}

var crRaces = []crRace{
	{name: "another writer creates it first", op: 0, verb: "create", other: otherCreates, isErr: apierrors.IsAlreadyExists,
		want: controllerutil.OperationResultUpdated, wire: map[string]int{"get 404": 1, "create 409": 1, "get 200": 1, "update 200": 1},
		data: map[string]string{"other": "x", "k": "v"}},
	{name: "another writer updates it in between", op: 0, existing: true, verb: "update", other: otherUpdates, isErr: apierrors.IsConflict,
		want: controllerutil.OperationResultUpdated, wire: map[string]int{"get 200": 2, "update 409": 1, "update 200": 1},
		data: map[string]string{"other": "x", "k": "v"}, labels: map[string]string{"stored": "yes"}},
	{name: "another writer deletes it before the update", op: 0, existing: true, verb: "update", other: otherDeletes, isErr: apierrors.IsNotFound,
		want: controllerutil.OperationResultCreated, wire: map[string]int{"get 200": 1, "update 404": 1, "get 404": 1, "create 201": 1},
		data: map[string]string{"k": "v"}, labels: map[string]string{"seed": "yes"}},
	{name: "another writer creates it first", op: 1, verb: "create", other: otherCreates, isErr: apierrors.IsAlreadyExists,
		want: controllerutil.OperationResultUpdated, wire: map[string]int{"get 404": 1, "create 409": 1, "get 200": 1, "patch 200": 1},
		data: map[string]string{"other": "x", "k": "v"}},
	{name: "another writer deletes it before the patch", op: 1, existing: true, verb: "patch", other: otherDeletes, isErr: apierrors.IsNotFound,
		want: controllerutil.OperationResultCreated, wire: map[string]int{"get 200": 1, "patch 404": 1, "get 404": 1, "create 201": 1},
		data: map[string]string{"k": "v"}, labels: map[string]string{"seed": "yes"}},
}

// testCtrlretryRaces makes another writer get in between the read and the
// write of controllerutil and of ctrlretry, each in a namespace of its
// own: controllerutil returns the race's error, ctrlretry retries from the
// caller's obj (labelled seed) and a fresh read, sending the requests
// listed, and stores what a fresh call would on the store the other writer
// left: the stored labels after a read (a label the other writer removed
// does not come back), the caller's after a create (not the first read's,
// nor its resourceVersion). Through m's cache the reads are not on the
// wire and a re-read may be stale (the cache has not seen the other
// writer yet): ctrlretry waits for a fresh one and sends the same writes.
func testCtrlretryRaces(t *testing.T, s *testserver.Server, m crClient) {
	w := newWriteEnv(t, s.Config)
	opts := client.Options{}
	var reader client.Reader
	if m.cached {
		reader = startCache(t, s.Config)
		opts.Cache = m.cacheOptions(reader)
	}
	c, err := client.New(w.counted, opts)
	if err != nil {
		t.Fatal(err)
	}
	waits := consistencyWaits(t)
	defer func() { m.checkConsistencyWaits(t, waits) }()
	for _, r := range crRaces {
		op := crOperations[r.op]
		t.Run(op.name+"/"+r.name, func(t *testing.T) {
			ctx := t.Context()
			want := r.wire
			if m.cached {
				want = maps.Clone(r.wire)
				maps.DeleteFunc(want, func(k string, _ int) bool { return strings.HasPrefix(k, "get ") })
			}
			call := func(impl crOperation) (string, *corev1.ConfigMap, controllerutil.OperationResult, map[string]int, error) {
				ns := w.namespace(t, "race-")
				cms := w.admin.CoreV1().ConfigMaps(ns)
				if r.existing {
					created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"stored": "yes", "gone": "yes"}},
						Data: map[string]string{"k": "old"}}, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if m.cached {
						awaitCached(t, ctx, reader, created) // the race is the other writer's, not the cache's
					}
				}
				w.before(r.verb, "configmaps", func() {
					if err := r.other(ctx, cms); err != nil {
						t.Errorf("the other writer: %v", err)
					}
				})
				obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm", Labels: map[string]string{"seed": "yes"}}}
				var res controllerutil.OperationResult
				var err error
				wire := w.requests("configmaps", func() {
					res, err = impl(ctx, c, obj, func() error {
						if obj.Data == nil {
							obj.Data = map[string]string{}
						}
						obj.Data["k"] = "v"
						return nil
					})
				})
				return ns, obj, res, wire, err
			}
			_, _, _, wire, err := call(op.controllerutil)
			t.Logf("controllerutil: %v, requests %v", err, wire)
			if !r.isErr(err) {
				t.Fatalf("controllerutil returned %v: the case races nothing it returns", err)
			}
			ns, obj, res, wire, err := call(op.ctr)
			t.Logf("ctrlretry: %q, %v, requests %v", res, err, wire)
			if err != nil || res != r.want {
				t.Fatalf("ctrlretry returned (%q, %v), want (%q, nil)", res, err, r.want)
			}
			if !maps.Equal(wire, want) {
				t.Errorf("requests %v, want %v", wire, want)
			}
			stored, err := w.admin.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(stored.Data, r.data) || !maps.Equal(stored.Labels, r.labels) {
				t.Errorf("stored data %v, labels %v; want %v, %v", stored.Data, stored.Labels, r.data, r.labels)
			}
			if obj.ResourceVersion != stored.ResourceVersion || !maps.Equal(obj.Data, stored.Data) || !maps.Equal(obj.Labels, stored.Labels) {
				t.Errorf("obj (resourceVersion %s, %v, %v) is not the stored object (%s)", obj.ResourceVersion, obj.Data, obj.Labels, stored.ResourceVersion)
			}
		})
	}
}

// runManager starts mgr, stopped when t ends, and waits for its cache.
func runManager(t *testing.T, mgr manager.Manager) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("the manager's cache did not start")
	}
}

// racingClient is a writer's client: its first Get returns once every
// writer's first Get has, so that all of them find the object absent and
// race to create it. It counts its Creates.
type racingClient struct {
	client.Client
	all     *sync.WaitGroup
	read    bool
	creates int
}

func (c *racingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if !c.read {
		c.read = true
		c.all.Done()
		c.all.Wait()
	}
	return err
}

func (c *racingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.creates++
	return c.Client.Create(ctx, obj, opts...)
}

// testCachedWriters runs two groups of 16 writers at once, each group on
// one absent ConfigMap through its own manager's cached client (the client
// a reconciler has), every writer setting the same data, every one finding
// the object absent (racingClient): ctrlretry.CreateOrUpdate with its
// default backoff, and controllerutil.CreateOrUpdate. ctrlretry's writers
// must all return nil, one having created the object and the others found
// it unchanged, and each must send one create: a NotFound that the cache
// answers right after the writer's AlreadyExists is stale and waits, it is
// never sent as another create (read-your-writes or not: the cache waits
// for the client's own writes, and the losers wrote nothing). controllerutil's
// errors are counted beside them.
func testCachedWriters(t *testing.T, s *testserver.Server, m crClient) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	waits := consistencyWaits(t)
	defer func() { m.checkConsistencyWaits(t, waits) }()
	const writers = 16
	type group struct {
		name    string
		ctrl    bool // controllerutil's, else ctrlretry's
		ns      string
		wire    reqcount.Counter
		mgr     manager.Manager
		clients []*racingClient
		results []controllerutil.OperationResult
		errs    []error
		tries   []int // ctrlretry's attempts per call
	}
	groups := []*group{
		{name: "ctrlretry"},
		{name: "controllerutil", ctrl: true},
	}
	for _, g := range groups {
		g.ns = createNamespace(t, s, "cached-")
		g.mgr = newManagerWith(t, g.wire.Config(s.Config), g.ns, m)
		runManager(t, g.mgr)
		// The cache starts an informer for a kind at its first read.
		if err := g.mgr.GetClient().List(ctx, &corev1.ConfigMapList{}, client.InNamespace(g.ns)); err != nil {
			t.Fatal(err)
		}
		g.results, g.errs, g.tries = make([]controllerutil.OperationResult, writers), make([]error, writers), make([]int, writers)
		all := &sync.WaitGroup{}
		all.Add(writers)
		for range writers {
			g.clients = append(g.clients, &racingClient{Client: g.mgr.GetClient(), all: all})
		}
	}
	before := make([]map[string]int, len(groups))
	for i, g := range groups {
		before[i] = g.wire.Outcomes().Of("configmaps") // the informer's list and watch
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		for i, c := range g.clients {
			wg.Go(func() {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: "shared"}}
				f := func() error { cm.Data = map[string]string{"k": "v"}; return nil }
				if g.ctrl {
					g.results[i], g.errs[i] = controllerutil.CreateOrUpdate(ctx, c, cm, f)
					return
				}
				g.results[i], g.errs[i] = ctrlretry.CreateOrUpdate(ctx, c, cm, f,
					ctrlretry.WithLoopOptions(retry.WithOnDone(func(e retry.DoneEvent) { g.tries[i] = e.Attempts })))
			})
		}
	}
	wg.Wait()

	for i, g := range groups {
		results, errs := map[controllerutil.OperationResult]int{}, map[string]int{}
		for j := range writers {
			results[g.results[j]]++
			if err := g.errs[j]; err != nil {
				errs[string(apierrors.ReasonForError(err))]++
			}
		}
		wire := g.wire.Outcomes().Of("configmaps")
		for k, n := range before[i] {
			if wire[k] -= n; wire[k] == 0 {
				delete(wire, k)
			}
		}
		t.Logf("%s: %d writers, results %v, errors by reason %v; requests on the wire %v", g.name, writers, results, errs, wire)
		if g.ctrl {
			if errs[string(metav1.StatusReasonAlreadyExists)] != writers-1 {
				t.Errorf("%s: errors %v, want %d AlreadyExists: the writers did not race", g.name, errs, writers-1)
			}
			continue
		}
		// A loser's attempts: its create (AlreadyExists), a stale read per
		// wait the cache lagged, and the read that found the object.
		attempts := 0
		for _, n := range g.tries {
			attempts += n
		}
		t.Logf("%s: %d attempts in %d calls: %d stale re-reads (none sent)", g.name, attempts, writers, attempts-writers-(writers-1))
		if len(errs) > 0 {
			t.Errorf("%s: errors %v, want none", g.name, errs)
		}
		if results[controllerutil.OperationResultCreated] != 1 || results[controllerutil.OperationResultNone] != writers-1 {
			t.Errorf("%s: results %v, want 1 created, %d unchanged", g.name, results, writers-1)
		}
		if wire["create 201"] != 1 || wire["create 409"] != writers-1 || len(wire) != 2 {
			t.Errorf("%s: requests %v, want one create per writer and nothing else", g.name, wire)
		}
		for j, c := range g.clients {
			if c.creates != 1 {
				t.Errorf("%s: writer %d sent %d creates, want 1", g.name, j, c.creates)
			}
		}
	}
}

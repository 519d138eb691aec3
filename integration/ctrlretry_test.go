package integration_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry/ctrlretry"
	"github.com/kuberetry/retry/integration/internal/testserver"
)

// TestCtrlretry runs ctrlretry beside controllerutil on one apiserver: the
// cases of controllerutil's own tests through both (same results, same
// requests), the races controllerutil returns and ctrlretry retries, 16
// writers through a manager's cached client, and the controller-runtime
// guide's reconciler.
func TestCtrlretry(t *testing.T) {
	s := startServer(t)
	t.Run("ControllerutilCases", func(t *testing.T) { testControllerutilCases(t, s) })
	t.Run("Races", func(t *testing.T) { testCtrlretryRaces(t, s) })
	t.Run("CachedWriters", func(t *testing.T) { testCachedWriters(t, s) })
	t.Run("Guide", func(t *testing.T) { testControllerRuntimeGuide(t, s) })
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

func testCtrlretryRaces(t *testing.T, s *testserver.Server)          { t.Skip("next") }
func testCachedWriters(t *testing.T, s *testserver.Server)           { t.Skip("next") }
func testControllerRuntimeGuide(t *testing.T, s *testserver.Server) { t.Skip("next") }

package ctrlretry_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// laggingReader is a cache that has not caught up: its first lag reads
// answer as the store stood when the reader was made, later ones read the
// store. It records "stale" or "fresh" per read.
type laggingReader struct {
	under client.Reader
	lag   int

	mu       sync.Mutex
	snapshot *corev1.ConfigMap // nil: the object was absent
	reads    []string
}

func newLaggingReader(t *testing.T, under client.Reader, name string, lag int) *laggingReader {
	t.Helper()
	r := &laggingReader{under: under, lag: lag}
	var cm corev1.ConfigMap
	switch err := under.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, &cm); {
	case err == nil:
		r.snapshot = &cm
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	return r
}

func (r *laggingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reads) >= r.lag {
		r.reads = append(r.reads, "fresh")
		return r.under.Get(ctx, key, obj, opts...)
	}
	r.reads = append(r.reads, "stale")
	if r.snapshot == nil {
		return apierrors.NewNotFound(configMaps, key.Name)
	}
	r.snapshot.DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

func (r *laggingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.under.List(ctx, list, opts...)
}

func (r *laggingReader) Reads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reads...)
}

// TestStaleReread: a re-read that a lagging cache answers with the version
// whose write just failed, or with NotFound right after AlreadyExists, is
// not written; the loop waits and reads again, each read an attempt.
func TestStaleReread(t *testing.T) {
	t.Parallel()
	conflict := conflictOf("cm")
	cases := []struct {
		name     string
		existing objects
		h        hooks
		lag      int
		backoff  retry.Backoff
		want     error // nil: success
		op       controllerutil.OperationResult
		calls    []string
		reads    []string
	}{
		{name: "Conflict, then the conflicted version twice", existing: storedConfigMap, h: hooks{update: otherUpdates}, lag: 2,
			op:    controllerutil.OperationResultUpdated,
			calls: []string{"get ok", "update Conflict", "update ok"},
			reads: []string{"stale", "stale", "fresh"}},
		{name: "Conflict, then only the conflicted version", existing: storedConfigMap, h: hooks{update: failsOnce(conflict)}, lag: 100,
			want:  conflict,
			calls: []string{"get ok", "update Conflict"},
			reads: []string{"stale", "stale", "stale", "stale"}},
		{name: "AlreadyExists, then NotFound twice", h: hooks{create: otherCreates}, lag: 2,
			op:    controllerutil.OperationResultUpdated,
			calls: []string{"get NotFound", "create AlreadyExists", "update ok"},
			reads: []string{"stale", "stale", "fresh"}},
		{name: "AlreadyExists, then only NotFound", h: hooks{create: otherCreates}, lag: 100,
			want:  apierrors.NewAlreadyExists(configMaps, "cm"),
			calls: []string{"get NotFound", "create AlreadyExists"},
			reads: []string{"stale", "stale", "stale", "stale"}},
		{name: "NotFound from update, then the deleted version", existing: storedConfigMap, h: hooks{update: otherDeletes}, lag: 1,
			op:    controllerutil.OperationResultCreated,
			calls: []string{"get ok", "update NotFound", "create ok"},
			reads: []string{"stale", "fresh"}},
		{name: "a stale read with 2 steps", existing: storedConfigMap, h: hooks{update: failsOnce(conflict)}, lag: 100,
			backoff: retry.Backoff{Steps: 2, Duration: 1},
			want:    conflict,
			calls:   []string{"get ok", "update Conflict"},
			reads:   []string{"stale"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fc := newFake(c.h, c.existing.build()...)
			r := newLaggingReader(t, fc.under, "cm", c.lag)
			in := newInstant()
			opts := []ctrlretry.Option{ctrlretry.WithReader(r), in.option()}
			steps := retry.DefaultRetry.Steps
			if c.backoff.Steps > 0 {
				opts, steps = append(opts, ctrlretry.WithBackoff(c.backoff)), c.backoff.Steps
			}
			obj := seedConfigMap()
			op, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj), opts...)
			switch {
			case c.want == nil && (err != nil || op != c.op):
				t.Errorf("returned (%q, %v), want (%q, nil)", op, err, c.op)
			case c.want == conflict && err != conflict:
				t.Errorf("returned (%q, %v), want the Conflict the update met, itself", op, err)
			case c.want != nil && c.want != conflict && (err == nil || err.Error() != c.want.Error() || op != controllerutil.OperationResultNone):
				t.Errorf("returned (%q, %v), want (%q, %v)", op, err, controllerutil.OperationResultNone, c.want)
			}
			if calls := fc.Calls(); !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("calls %s, want %s", join(calls), join(c.calls))
			}
			if reads := r.Reads(); !reflect.DeepEqual(reads, c.reads) {
				t.Errorf("re-reads %s, want %s", join(reads), join(c.reads))
			}
			wantAttempts := 1 + len(c.reads)
			if c.want != nil {
				wantAttempts = steps
			}
			if in.attempts != wantAttempts || len(in.waits) != wantAttempts-1 {
				t.Errorf("%d attempts, %d waits; want %d attempts, one wait before each but the first", in.attempts, len(in.waits), wantAttempts)
			}
		})
	}
}

// TestCreateClears: a stored copy of an object deleted since is created
// without what a create must not carry (controllerutil sends it, and the
// create fails), with the caller's labels and the MutateFn's data.
func TestCreateClears(t *testing.T) {
	t.Parallel()
	src := newFake(hooks{}, storedConfigMap()...)
	copyOf := func() *corev1.ConfigMap {
		var cm corev1.ConfigMap
		if err := src.under.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "cm"}, &cm); err != nil {
			t.Fatal(err)
		}
		// What the server sets, as a copy of a stored object (one being
		// deleted, its fields written by another manager) carries it.
		now := metav1.Now()
		grace := int64(30)
		cm.UID, cm.Generation, cm.CreationTimestamp = "uid-1", 3, now
		cm.DeletionTimestamp, cm.DeletionGracePeriodSeconds = &now, &grace
		cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationApply}}
		return &cm
	}
	var sent *corev1.ConfigMap
	seeCreate := func(_ context.Context, _ client.WithWatch, obj client.Object, _ int) error {
		sent = obj.DeepCopyObject().(*corev1.ConfigMap)
		return nil
	}

	obj := copyOf()
	if _, err := controllerutil.CreateOrUpdate(testContext(t), newFake(hooks{}), obj, setK(obj)); err == nil {
		t.Fatal("controllerutil created an object carrying a resourceVersion: the case shows nothing")
	}
	fc := newFake(hooks{create: seeCreate})
	obj = copyOf()
	op, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj))
	if err != nil || op != controllerutil.OperationResultCreated {
		t.Fatalf("returned (%q, %v), want created", op, err)
	}
	switch {
	case sent == nil:
		t.Fatal("no create")
	case sent.ResourceVersion != "" || sent.UID != "" || !sent.CreationTimestamp.IsZero() || sent.Generation != 0 || sent.ManagedFields != nil ||
		sent.DeletionTimestamp != nil || sent.DeletionGracePeriodSeconds != nil:
		t.Errorf("the create carried resourceVersion %q, uid %q, creationTimestamp %v, generation %d, managedFields %v, deletionTimestamp %v, deletionGracePeriodSeconds %v",
			sent.ResourceVersion, sent.UID, sent.CreationTimestamp, sent.Generation, sent.ManagedFields,
			sent.DeletionTimestamp, sent.DeletionGracePeriodSeconds)
	case sent.Labels["stored"] != "yes" || sent.Data["k"] != "v":
		t.Errorf("the create lost the caller's labels or the MutateFn's data: %v", sent)
	}
}

// TestNotRetried: what no retry can mend is returned at once, as it is.
func TestNotRetried(t *testing.T) {
	t.Parallel()
	apply := applyConflict("cm")
	noNamespace := apierrors.NewNotFound(schemaNamespaces, ns)
	serverError := apierrors.NewInternalError(errors.New("etcd is down"))
	mutateErr := errors.New("mutate failed")
	cases := []struct {
		name     string
		existing objects
		h        hooks
		reader   client.Reader
		f        func(client.Object) controllerutil.MutateFn
		want     error
		attempts int
	}{
		{name: "an apply conflict from the update", existing: storedConfigMap, h: hooks{update: failsOnce(apply)}, want: apply, attempts: 1},
		{name: "NotFound from create: no namespace", h: hooks{create: failsOnce(noNamespace)}, want: noNamespace, attempts: 1},
		{name: "a get error", existing: storedConfigMap, h: hooks{get: failsOnce(serverError)}, want: serverError, attempts: 1},
		{name: "a re-read's error", existing: storedConfigMap, h: hooks{update: failsOnce(conflictOf("cm"))},
			reader: failingReader{serverError}, want: serverError, attempts: 2},
		{name: "MutateFn's error after a Conflict", existing: storedConfigMap, h: hooks{update: otherUpdates},
			f: func(obj client.Object) controllerutil.MutateFn {
				calls := 0
				return func() error {
					if calls++; calls > 1 {
						return mutateErr
					}
					return setK(obj)()
				}
			}, want: mutateErr, attempts: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fc := newFake(c.h, c.existing.build()...)
			in := newInstant()
			opts := []ctrlretry.Option{in.option()}
			if c.reader != nil {
				opts = append(opts, ctrlretry.WithReader(c.reader))
			}
			obj := seedConfigMap()
			f := setK
			if c.f != nil {
				f = c.f
			}
			if _, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, f(obj), opts...); err != c.want {
				t.Errorf("returned %v, want %v itself", err, c.want)
			}
			if in.attempts != c.attempts {
				t.Errorf("%d attempts (calls %s), want %d", in.attempts, join(fc.Calls()), c.attempts)
			}
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return r.err
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

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

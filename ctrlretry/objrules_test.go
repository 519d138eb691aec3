package ctrlretry

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kuberetry/retry"
)

// The root module's loops are the oracle of this file's rules: each test
// runs one through the root's public API and checks that ctrlretry's rule
// decides as it did.

// twoAttempts allows one retry, with no wait.
var twoAttempts = retry.Backoff{Steps: 2}

var cms = schema.GroupResource{Resource: "configmaps"}

// probe is a ConfigMap with every field of its ObjectMeta set.
func probe(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	deleted := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	grace := int64(30)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:                       "cm",
			GenerateName:               "cm-",
			Namespace:                  "default",
			UID:                        types.UID("8d6c1e5e-0000-4000-8000-000000000001"),
			ResourceVersion:            "42",
			Generation:                 3,
			CreationTimestamp:          metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			DeletionTimestamp:          &deleted,
			DeletionGracePeriodSeconds: &grace,
			Labels:                     map[string]string{"app": "jobs"},
			Annotations:                map[string]string{"note": "kept"},
			OwnerReferences:            []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: "o-1"}},
			Finalizers:                 []string{"example.com/keep"},
			ManagedFields:              []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Data: map[string]string{"k": "old"},
	}
	cm.SetSelfLink("/api/v1/namespaces/default/configmaps/cm") // deprecated as a field, not as a setter
	// A field that a newer apimachinery adds to ObjectMeta must be set
	// here too, or the comparison below could not see a rule about it.
	v := reflect.ValueOf(cm.ObjectMeta)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("probe leaves ObjectMeta.%s unset: set it", v.Type().Field(i).Name)
		}
	}
	return cm
}

// TestClearForCreateAsTheRoot: ctrlretry clears, of an object carrying
// every metadata field, what the root module's CreateOrUpdate clears
// before its create, and nothing else.
func TestClearForCreateAsTheRoot(t *testing.T) {
	t.Parallel()
	setData := func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"k": "new"}; return nil }

	// The root's create path: a stored copy whose update meets NotFound
	// (the object was deleted), then a read that finds nothing, then the
	// create of current as the root clears it.
	var sent *corev1.ConfigMap
	_, res, err := retry.CreateOrUpdate(context.Background(), twoAttempts, probe(t),
		func(context.Context) (*corev1.ConfigMap, error) { return nil, apierrors.NewNotFound(cms, "cm") },
		setData,
		func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			sent = cm.DeepCopy()
			return cm, nil
		},
		func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return nil, apierrors.NewNotFound(cms, "cm")
		})
	if err != nil || res != retry.ResultCreated || sent == nil {
		t.Fatalf("the root's CreateOrUpdate: %v, %v, created %v; want a create", err, res, sent != nil)
	}

	ours := probe(t)
	clearForCreate(ours)
	if err := setData(ours); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ours.ObjectMeta, sent.ObjectMeta) {
		t.Errorf("ctrlretry's create carries\n%+v\nthe root's\n%+v", ours.ObjectMeta, sent.ObjectMeta)
	}
	if ours.ResourceVersion != "" || len(ours.Finalizers) != 1 {
		t.Errorf("cleared %+v: want no resourceVersion and the finalizer kept", ours.ObjectMeta)
	}
}

// writeErrors are the errors whose retry the rules decide.
func writeErrors() map[string]error {
	conflict := apierrors.NewConflict(cms, "cm", errors.New("the object has been modified"))
	quota := apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "quota", errors.New("the object has been modified"))
	apply := apierrors.NewConflict(cms, "cm", errors.New(`Apply failed with 1 conflict: conflict with "other": .data.k`))
	apply.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Field: ".data.k"}}
	return map[string]error{
		"Conflict":                 conflict,
		"quota Conflict":           quota,
		"wrapped Conflict":         fmt.Errorf("update: %w", conflict),
		"apply Conflict":           apply,
		"wrapped apply Conflict":   fmt.Errorf("apply: %w", apply),
		"joined apply and another": errors.Join(apply, conflict),
		"AlreadyExists":            apierrors.NewAlreadyExists(cms, "cm"),
		"NotFound":                 apierrors.NewNotFound(cms, "cm"),
		"wrapped NotFound":         fmt.Errorf("update: %w", apierrors.NewNotFound(cms, "cm")),
		"Invalid":                  apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "cm", nil),
		"ServiceUnavailable":       apierrors.NewServiceUnavailable("down"),
		"TooManyRequests":          apierrors.NewTooManyRequests("slow down", 1),
		"plain error":              errors.New("connection reset"),
	}
}

// failOnce returns a write that fails with err on its first call and then
// passes, counting its calls in n.
func failOnce(err error, n *int) func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return func(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		if *n++; *n == 1 {
			return nil, err
		}
		return cm, nil
	}
}

// TestRetriedAsByTheRoot: for each error, ctrlretry's rules retry a
// create, an update or a patch, and a plain Conflict loop, exactly when
// the root module's loops retry the same write.
func TestRetriedAsByTheRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setData := func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"k": "new"}; return nil }
	stored := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm", ResourceVersion: "7"}}
	}
	never := func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		return nil, errors.New("not called")
	}
	retried := map[string]bool{}
	for name, werr := range writeErrors() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A create: the root's CreateOrUpdate of a built object that
			// the read does not find.
			creates := 0
			_, _, _ = retry.CreateOrUpdate(ctx, twoAttempts,
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}},
				func(context.Context) (*corev1.ConfigMap, error) { return nil, apierrors.NewNotFound(cms, "cm") },
				setData, failOnce(werr, &creates), never)
			if root := creates == 2; retriableCreate(werr) != root {
				t.Errorf("a create's error: ctrlretry retries it: %v, the root: %v", !root, root)
			}

			// An update, or a patch (ctrlretry's CreateOrPatch creates
			// too): the root's CreateOrUpdate of a stored object.
			updates := 0
			_, _, _ = retry.CreateOrUpdate(ctx, twoAttempts, stored(),
				func(context.Context) (*corev1.ConfigMap, error) { return stored(), nil },
				setData, never, failOnce(werr, &updates))
			if root := updates == 2; retriableWrite(werr) != root {
				t.Errorf("an update's error: ctrlretry retries it: %v, the root: %v", !root, root)
			}

			// A Conflict loop's: the root's RetryOnConflict.
			calls := 0
			_ = retry.RetryOnConflict(twoAttempts, func() error {
				if calls++; calls == 1 {
					return werr
				}
				return nil
			})
			if root := calls == 2; retriableConflict(werr) != root {
				t.Errorf("RetryOnConflict: ctrlretry retries it: %v, the root: %v", !root, root)
			}
		})
		retried[name] = retriableWrite(werr)
	}
	// The table tells both answers apart: some errors are retried, some not.
	if !retried["Conflict"] || retried["apply Conflict"] {
		t.Errorf("retriableWrite: Conflict %v, apply Conflict %v; want true, false", retried["Conflict"], retried["apply Conflict"])
	}
}

// TestNoImportOfTheRootsInternals: ctrlretry's code imports no internal
// package of the root module, whose versions promise nothing about them
// to another module.
func TestNoImportOfTheRootsInternals(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path, "github.com/kuberetry/retry/internal/") {
				t.Errorf("%s imports %s: use the root module's public API", f, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source file read")
	}
}

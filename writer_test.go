package retry_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// badCopy is an Object whose DeepCopyObject returns another type.
type badCopy struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (*badCopy) DeepCopyObject() runtime.Object { return &Counter{} }

func TestWritesRefuseARenamingMutate(t *testing.T) {
	t.Parallel()
	rename := func(obj *Counter) error { obj.Name = "other"; return nil }
	move := func(obj *Counter) error { obj.Namespace = "elsewhere"; return nil }
	for _, tc := range []struct {
		name   string
		run    func(c *calls) error
		exists bool
		want   string
	}{
		{"UpdateOnConflict, name", func(c *calls) error {
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, c.get, rename, c.update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "other"`},
		{"UpdateOnConflict, namespace", func(c *calls) error {
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, c.cached(t), c.get, move, c.update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "elsewhere/jobs"`},
		{"CreateOrUpdate, update path", func(c *calls) error {
			_, _, err := c.createOrUpdate(desired(), rename)
			return err
		}, true, `"jobs" to "other"`},
		{"CreateOrUpdate, create path", func(c *calls) error {
			_, _, err := c.createOrUpdate(desired(), move)
			return err
		}, false, `"jobs" to "elsewhere/jobs"`},
		{"PatchOnConflict", func(c *calls) error {
			_, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, nil, c.get, rename,
				func(ctx context.Context, o *Counter, data []byte) (*Counter, error) {
					return c.api.Patch(ctx, o.Name, data)
				}, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "other"`},
		{"Update", func(c *calls) error {
			_, err := retry.Update(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), rename, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "other"`},
		{"UpdateStatus", func(c *calls) error {
			_, err := retry.UpdateStatus(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, c.cached(t), move, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "elsewhere/jobs"`},
		{"Ensure, update path", func(c *calls) error {
			_, _, err := retry.Ensure(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), rename, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "other"`},
		{"Ensure, create path", func(c *calls) error {
			_, _, err := retry.Ensure(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), move, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, false, `"jobs" to "elsewhere/jobs"`},
		{"Patch", func(c *calls) error {
			_, err := retry.Patch(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, c.cached(t), rename, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		}, true, `"jobs" to "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCalls()
			if !tc.exists {
				c.api = newCounters()
			}
			err := tc.run(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "retry: mutate changed the object's key from "+tc.want)
			assert.Zero(t, c.api.updates+c.api.creates+c.api.statusUpdates+c.api.patches, "nothing written")
			assert.NotContains(t, c.log, "wait", "no retry")
		})
	}
}

func TestWritesNeverModifyGetsObject(t *testing.T) {
	t.Parallel()
	// get reads a shared cache, as a lister does: whatever mutate does and
	// whatever the write answers, the cached object stays as it was.
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"refused with a conflict", conflict(1)},
		{"refused", apierrors.NewBadRequest("invalid")},
		{"written", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1", Labels: map[string]string{"a": "1"}}}
			snapshot := cache.DeepCopyObject()
			get := func(context.Context) (*Counter, error) { return cache, nil }
			mutate := func(obj *Counter) error { obj.Count++; obj.Labels["b"] = "2"; return nil }
			update := func(_ context.Context, obj *Counter) (*Counter, error) {
				if tc.err != nil {
					return nil, tc.err
				}
				return obj, nil
			}
			b := retry.Backoff{Steps: 2}
			_, _ = retry.UpdateOnConflict(context.Background(), b, nil, get, mutate, update, retry.WithSleeper(&fakeSleeper{}))
			assert.Equal(t, snapshot, cache, "UpdateOnConflict")
			_, _, _ = retry.CreateOrUpdate(context.Background(), b, desired(), get, mutate, update, update, retry.WithSleeper(&fakeSleeper{}))
			assert.Equal(t, snapshot, cache, "CreateOrUpdate")
			patch := func(ctx context.Context, obj *Counter, _ []byte) (*Counter, error) { return update(ctx, obj) }
			_, _ = retry.PatchOnConflict(context.Background(), b, nil, get, mutate, patch, retry.WithSleeper(&fakeSleeper{}))
			assert.Equal(t, snapshot, cache, "PatchOnConflict")
		})
	}
}

// everyForm runs each write loop over c with current (the typed forms
// take it as obj) and mutate: the closure forms given c's methods, the
// typed forms c itself.
func everyForm() map[string]func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
	ctx := context.Background()
	get := func(c *counterClient) func(context.Context) (*Counter, error) {
		return func(ctx context.Context) (*Counter, error) { return c.Get(ctx, "jobs", metav1.GetOptions{}) }
	}
	update := func(c *counterClient) func(context.Context, *Counter) (*Counter, error) {
		return func(ctx context.Context, o *Counter) (*Counter, error) {
			return c.Update(ctx, o, metav1.UpdateOptions{})
		}
	}
	create := func(c *counterClient) func(context.Context, *Counter) (*Counter, error) {
		return func(ctx context.Context, o *Counter) (*Counter, error) {
			return c.Create(ctx, o, metav1.CreateOptions{})
		}
	}
	patch := func(c *counterClient) func(context.Context, *Counter, []byte) (*Counter, error) {
		return func(ctx context.Context, o *Counter, data []byte) (*Counter, error) {
			return c.Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{})
		}
	}
	b := retry.DefaultRetry
	return map[string]func(c *counterClient, current *Counter, mutate func(*Counter) error) error{
		"UpdateOnConflict": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, err := retry.UpdateOnConflict(ctx, b, current, get(c), mutate, update(c), retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"PatchOnConflict": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, err := retry.PatchOnConflict(ctx, b, current, get(c), mutate, patch(c), retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"CreateOrUpdate": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, _, err := retry.CreateOrUpdate(ctx, b, current, get(c), mutate, create(c), update(c), retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"Update": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, err := retry.Update(ctx, b, c, current, mutate, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"UpdateStatus": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, err := retry.UpdateStatus(ctx, b, c, current, mutate, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"Ensure": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, _, err := retry.Ensure(ctx, b, c, current, mutate, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
		"Patch": func(c *counterClient, current *Counter, mutate func(*Counter) error) error {
			_, err := retry.Patch(ctx, b, c, current, mutate, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			return err
		},
	}
}

func TestWritesReadABuiltObjectFirst(t *testing.T) {
	t.Parallel()
	// Another writer has added its finalizer and its status since the
	// caller built its object (a name, no resourceVersion). Each form reads
	// first and changes what it read, so the other writer's finalizer and
	// status survive; written without a read, the built object would have
	// replaced them (an update without a resourceVersion is applied
	// unconditionally, and a merge patch replaces a list whole).
	add := func(list []string, s string) []string {
		if slices.Contains(list, s) {
			return list
		}
		return append(list, s)
	}
	mutate := func(o *Counter) error {
		o.Finalizers = add(o.Finalizers, "mine")
		o.Status = strings.Join(add(strings.Fields(o.Status), "mine"), " ")
		return nil
	}
	for name, form := range everyForm() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCounterClient("jobs")
			other := c.api.objs["jobs"].DeepCopyObject().(*Counter)
			other.Finalizers, other.Status = []string{"other"}, "other"
			c.api.store(other)
			built := desired()
			built.Count = 3 // a field the caller set, which mutate leaves
			require.NoError(t, form(c, built, mutate))

			write := map[string]string{"PatchOnConflict": "patch", "Patch": "patch", "UpdateStatus": "updateStatus"}[name]
			if write == "" {
				write = "update"
			}
			assert.Equal(t, []string{"get", write}, c.log, "read, then write")
			got := c.api.objs["jobs"]
			assert.Contains(t, strings.Fields(got.Status), "other", "the other writer's status kept")
			if name == "UpdateStatus" { // the server writes the status alone
				assert.Equal(t, "other mine", got.Status)
			} else {
				assert.Equal(t, []string{"other", "mine"}, got.Finalizers, "the other writer's finalizer kept")
			}
			assert.Zero(t, got.Count, "only mutate's change written, not the built object's fields")
			assert.Equal(t, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Count: 3}, built, "the built object itself untouched")
		})
	}
}

func TestWritesNeedGetForABuiltObject(t *testing.T) {
	t.Parallel()
	// Without get, a current that carries no resourceVersion could only be
	// written blind: an error at once, calling nothing.
	calls := 0
	mutate := func(*Counter) error { calls++; return nil }
	write := func(context.Context, *Counter) (*Counter, error) { calls++; return nil, nil }
	patch := func(context.Context, *Counter, []byte) (*Counter, error) { calls++; return nil, nil }
	done := retry.WithOnDone(func(retry.DoneEvent) { calls++ })
	for _, current := range []*Counter{nil, desired()} {
		_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, nil, mutate, write, done)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "retry: get is nil and current carries no resourceVersion")
		_, err = retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, nil, mutate, patch, done)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "retry: get is nil and current carries no resourceVersion")
	}
	_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, &noMeta{}, nil,
		func(*noMeta) error { calls++; return nil }, func(context.Context, *noMeta) (*noMeta, error) { calls++; return nil, nil }, done)
	require.Error(t, err, "an object without object metadata carries no resourceVersion either")
	assert.Contains(t, err.Error(), "retry: get is nil and current carries no resourceVersion")
	assert.Zero(t, calls, "nothing called: no mutate, no write, no OnDone")
}

func TestWritesReadAnObjectWithoutMetadataFirst(t *testing.T) {
	t.Parallel()
	// An object without object metadata has no resourceVersion the loop
	// can see, so it is never taken as stored: the first attempt reads.
	var log []string
	stored := &noMeta{TypeMeta: metav1.TypeMeta{Kind: "Stored"}}
	get := func(context.Context) (*noMeta, error) { log = append(log, "get"); return stored, nil }
	mutate := func(o *noMeta) error { log = append(log, "mutate "+o.Kind); o.APIVersion = "v2"; return nil }
	update := func(_ context.Context, o *noMeta) (*noMeta, error) { log = append(log, "update"); return o, nil }
	got, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, &noMeta{TypeMeta: metav1.TypeMeta{Kind: "Built"}}, get, mutate, update)
	require.NoError(t, err)
	assert.Equal(t, []string{"get", "mutate Stored", "update"}, log)
	assert.Equal(t, metav1.TypeMeta{Kind: "Stored", APIVersion: "v2"}, got.TypeMeta)
}

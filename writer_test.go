package retry_test

import (
	"context"
	"testing"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, c.get, rename, c.update, retry.WithSleeper(c))
			return err
		}, true, `"jobs" to "other"`},
		{"UpdateOnConflict, namespace", func(c *calls) error {
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, c.cached(t), c.get, move, c.update, retry.WithSleeper(c))
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
				}, retry.WithSleeper(c))
			return err
		}, true, `"jobs" to "other"`},
		{"Update", func(c *calls) error {
			_, err := retry.Update(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), rename, retry.WithSleeper(c))
			return err
		}, true, `"jobs" to "other"`},
		{"UpdateStatus", func(c *calls) error {
			_, err := retry.UpdateStatus(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, c.cached(t), move, retry.WithSleeper(c))
			return err
		}, true, `"jobs" to "elsewhere/jobs"`},
		{"Ensure, update path", func(c *calls) error {
			_, _, err := retry.Ensure(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), rename, retry.WithSleeper(c))
			return err
		}, true, `"jobs" to "other"`},
		{"Ensure, create path", func(c *calls) error {
			_, _, err := retry.Ensure(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, desired(), move, retry.WithSleeper(c))
			return err
		}, false, `"jobs" to "elsewhere/jobs"`},
		{"Patch", func(c *calls) error {
			_, err := retry.Patch(context.Background(), retry.DefaultRetry, &counterClient{api: c.api}, c.cached(t), rename, retry.WithSleeper(c))
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
			_, _ = retry.UpdateOnConflict(context.Background(), b, nil, get, mutate, update, retry.WithSleeper(noSleep{}))
			assert.Equal(t, snapshot, cache, "UpdateOnConflict")
			_, _, _ = retry.CreateOrUpdate(context.Background(), b, desired(), get, mutate, update, update, retry.WithSleeper(noSleep{}))
			assert.Equal(t, snapshot, cache, "CreateOrUpdate")
			patch := func(ctx context.Context, obj *Counter, _ []byte) (*Counter, error) { return update(ctx, obj) }
			_, _ = retry.PatchOnConflict(context.Background(), b, nil, get, mutate, patch, retry.WithSleeper(noSleep{}))
			assert.Equal(t, snapshot, cache, "PatchOnConflict")
		})
	}
}

package retry_test

import (
	"context"
	"encoding/json"
	"errors"
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

func TestPatchOnConflictNothingToSend(t *testing.T) {
	t.Parallel()
	from := withVersion(map[string]any{"spec": map[string]any{"a": int64(1)}}, "7")
	for name, to := range map[string]map[string]any{
		"no change": withVersion(map[string]any{"spec": map[string]any{"a": int64(1)}}, "7"),
		// The no-op check of unstructured content: the same JSON.
		"the same number as a float64": withVersion(map[string]any{"spec": map[string]any{"a": float64(1)}}, "7"),
		// mutate may not move the lock: a changed resourceVersion alone
		// is nothing to send.
		"only the resourceVersion": withVersion(map[string]any{"spec": map[string]any{"a": int64(1)}}, "8"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := patchOf(t, from, to)
			require.NoError(t, err)
			assert.Nil(t, data, "patch not called")
		})
	}
	t.Run("a change JSON does not carry", func(t *testing.T) {
		t.Parallel()
		// A field outside the type's JSON differs to the no-op check of a
		// typed object, but no merge patch can carry it: nothing is sent.
		current := &hiddenNote{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "7"}}
		obj, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, nil,
			func(h *hiddenNote) error { h.Note = "not in JSON"; return nil },
			func(context.Context, *hiddenNote, []byte) (*hiddenNote, error) {
				return nil, errors.New("patch called")
			})
		require.NoError(t, err)
		assert.Equal(t, "not in JSON", obj.Note, "the copy mutate was given")
	})
}

// hiddenNote is an Object with a field its JSON does not carry.
type hiddenNote struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Note              string `json:"-"`
}

func (h *hiddenNote) DeepCopyObject() runtime.Object {
	c := *h
	h.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func TestPatchOnConflictRetriesAConflict(t *testing.T) {
	t.Parallel()
	// Another writer changes the object between the read and the patch:
	// the lock makes the server refuse the patch, the retry reads afresh
	// and patches the version it read, keeping the other writer's change.
	c := newCounterClient("jobs")
	cached, err := c.api.Get(context.Background(), "jobs")
	require.NoError(t, err)
	c.api.beforePatch = func() {
		if c.api.patches == 1 {
			c.api.touch("jobs")
		}
	}
	get := func(ctx context.Context) (*Counter, error) { return c.Get(ctx, "jobs", metav1.GetOptions{}) }
	patch := func(ctx context.Context, o *Counter, data []byte) (*Counter, error) {
		return c.Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{})
	}
	obj, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, cached, get,
		func(o *Counter) error { o.Owner = "a"; return nil }, patch, retry.WithSleeper(&fakeSleeper{log: &c.log}))
	require.NoError(t, err)
	assert.Equal(t, []string{"patch", "wait", "get", "patch"}, c.log)
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, 100, obj.Count, "the other writer's change is kept")
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"2"},"owner":"a"}`, string(c.api.lastPatch), "locked to the version the retry read")
	assert.Empty(t, cached.Owner, "current is never modified")
}

func TestPatchOnConflictErrors(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(counterResource, "jobs", errors.New("no"))
	t.Run("patch's error other than Conflict", func(t *testing.T) {
		t.Parallel()
		calls := 0
		_, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, nil,
			func(context.Context) (*Counter, error) {
				return &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}, nil
			},
			func(o *Counter) error { o.Owner = "a"; return nil },
			func(context.Context, *Counter, []byte) (*Counter, error) { calls++; return nil, forbidden },
			retry.WithSleeper(&fakeSleeper{}))
		assert.Same(t, forbidden, err)
		assert.Equal(t, 1, calls, "not retried")
	})
	t.Run("exhaustion returns the last Conflict", func(t *testing.T) {
		t.Parallel()
		var last error
		n := 0
		obj, err := retry.PatchOnConflict(context.Background(), retry.Backoff{Steps: 3}, nil,
			func(context.Context) (*Counter, error) {
				return &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}, nil
			},
			func(o *Counter) error { o.Owner = "a"; return nil },
			func(context.Context, *Counter, []byte) (*Counter, error) { n++; last = conflict(n); return nil, last },
			retry.WithSleeper(&fakeSleeper{}))
		assert.True(t, err == last, "the last Conflict itself: %v", err)
		assert.Nil(t, obj)
		assert.Equal(t, 3, n)
	})
	t.Run("an object that does not encode to a JSON object", func(t *testing.T) {
		t.Parallel()
		_, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, nil,
			func(context.Context) (*jsonScalar, error) { return &jsonScalar{V: 1}, nil },
			func(o *jsonScalar) error { o.V = 2; return nil },
			func(context.Context, *jsonScalar, []byte) (*jsonScalar, error) {
				return nil, errors.New("patch called")
			})
		require.Error(t, err)
		assert.Equal(t, "retry: a *retry_test.jsonScalar does not encode to a JSON object, so no merge patch can change it", err.Error())
	})
}

// jsonScalar is an Object that encodes to a JSON number.
type jsonScalar struct {
	metav1.TypeMeta
	V int
}

func (j *jsonScalar) DeepCopyObject() runtime.Object { c := *j; return &c }
func (j *jsonScalar) MarshalJSON() ([]byte, error)   { return json.Marshal(j.V) }

func TestPatchOnConflictRejectsBadInput(t *testing.T) {
	t.Parallel()
	called := 0
	get := func(context.Context) (*Counter, error) { called++; return nil, nil }
	mutate := func(*Counter) error { called++; return nil }
	patch := func(context.Context, *Counter, []byte) (*Counter, error) { called++; return nil, nil }
	current := &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1"}}
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		run  func() (*Counter, error)
		want string
	}{
		{"nil mutate", func() (*Counter, error) {
			return retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, get, nil, patch)
		}, "retry: mutate is nil"},
		{"nil patch", func() (*Counter, error) {
			return retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, get, mutate, nil)
		}, "retry: patch is nil"},
		{"nil get and zero current", func() (*Counter, error) {
			return retry.PatchOnConflict(context.Background(), retry.DefaultRetry, nil, nil, mutate, patch)
		}, "retry: get is nil"},
		{"nil ctx", func() (*Counter, error) {
			return retry.PatchOnConflict(nilCtx, retry.DefaultRetry, current, get, mutate, patch)
		}, "retry: ctx is nil"},
		{"invalid backoff", func() (*Counter, error) {
			return retry.PatchOnConflict(context.Background(), retry.Backoff{}, current, get, mutate, patch)
		}, "Steps 0"},
		{"negative attempt timeout", func() (*Counter, error) {
			return retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, get, mutate, patch, retry.WithAttemptTimeout(-1))
		}, "retry: WithAttemptTimeout(-1ns)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj *Counter
			var err error
			require.NotPanics(t, func() { obj, err = tc.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			assert.Nil(t, obj)
		})
	}
	assert.Zero(t, called, "nothing called")
}

package retry_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCreateOrUpdateRule1StoredCurrentIsNotRead(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	snapshot := current.DeepCopyObject()

	obj, res, err := c.createOrUpdate(current, c.claim("a"))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultUpdated, res)
	assert.Equal(t, []string{"mutate", "update"}, c.log, "a stored current is changed without a get")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, "2", obj.ResourceVersion, "update's object is returned")
	assert.Equal(t, snapshot, current, "current is never modified")
}

func TestCreateOrUpdateRule1BuiltCurrentIsRead(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := desired()
	snapshot := current.DeepCopyObject()

	obj, res, err := c.createOrUpdate(current, c.claim("a"))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultUpdated, res)
	assert.Equal(t, []string{"get", "mutate", "update"}, c.log, "a current without a resourceVersion only names the object")
	assert.Equal(t, "2", obj.ResourceVersion)
	assert.Equal(t, snapshot, current)
}

func TestCreateOrUpdateRule2Creates(t *testing.T) {
	t.Parallel()
	c := &calls{api: newCounters()}
	current := desired()
	current.Labels = map[string]string{"app": "jobs"}
	snapshot := current.DeepCopyObject()

	obj, res, err := c.createOrUpdate(current, c.claim("a"))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultCreated, res)
	assert.Equal(t, []string{"get", "mutate", "create"}, c.log, "no no-op check on the create path")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, "jobs", obj.Labels["app"], "the create carries current's metadata")
	assert.Equal(t, "1", obj.ResourceVersion, "create's object is returned")
	assert.Equal(t, snapshot, current)
}

func TestCreateOrUpdateRule2CreatesFromAStoredCopy(t *testing.T) {
	t.Parallel()
	// current comes from a cache, but the object has been deleted on the
	// server: the update meets NotFound, the next attempt's get too, and the
	// object is created from a copy of current, without the fields a create
	// must not carry.
	c := &calls{api: newCounters()}
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	grace := int64(30)
	current := &Counter{ObjectMeta: metav1.ObjectMeta{
		Name: "jobs", Namespace: "ns", ResourceVersion: "41", UID: "old-uid", Generation: 3,
		//lint:ignore SA1019 a cached copy may still carry selfLink; the create path clears it
		SelfLink:          "/api/v1/namespaces/ns/counters/jobs",
		CreationTimestamp: deleted, DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: &grace,
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "someone-else", Operation: metav1.ManagedFieldsOperationUpdate}},
		Labels:          map[string]string{"app": "jobs"},
		Annotations:     map[string]string{"note": "kept"},
		Finalizers:      []string{"example.com/cleanup"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid"}},
	}}
	snapshot := current.DeepCopyObject()
	var sent *Counter
	create := func(ctx context.Context, obj *Counter) (*Counter, error) {
		sent = obj.DeepCopyObject().(*Counter)
		return c.create(ctx, obj)
	}

	obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), create, c.update,
		retry.WithSleeper(&fakeSleeper{log: &c.log}))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultCreated, res)
	assert.Equal(t, []string{"mutate", "update", "wait", "get", "mutate", "create"}, c.log,
		"update's NotFound is retried; the next attempt's get finds nothing and creates")
	assert.Equal(t, "1", obj.ResourceVersion)
	require.NotNil(t, sent)
	want := current.DeepCopyObject().(*Counter)
	want.ResourceVersion, want.UID, want.Generation = "", "", 0
	want.SelfLink = "" //lint:ignore SA1019 cleared on the create path
	want.CreationTimestamp, want.DeletionTimestamp, want.DeletionGracePeriodSeconds = metav1.Time{}, nil, nil
	want.ManagedFields = nil
	want.Owner = "a"
	assert.Equal(t, want, sent, "cleared: resourceVersion, uid, generation, selfLink, timestamps, managedFields; kept: the rest")
	assert.Equal(t, snapshot, current, "current is never modified")
}

func TestCreateOrUpdateRule2RaceAlreadyExists(t *testing.T) {
	t.Parallel()
	// Another reconciler creates the object between this one's get and
	// create: AlreadyExists is retried and the next attempt updates.
	c := &calls{api: newCounters()}
	c.api.beforeCreate = func() {
		if c.api.creates == 1 {
			_, err := c.api.Create(context.Background(), &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Count: 5})
			require.NoError(t, err)
		}
	}

	obj, res, err := c.createOrUpdate(desired(), c.claim("a"))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultUpdated, res)
	assert.Equal(t, []string{"get", "mutate", "create", "wait", "get", "mutate", "update"}, c.log)
	assert.Equal(t, 5, obj.Count, "the other writer's object, changed")
	assert.Equal(t, "a", obj.Owner)
}

func TestCreateOrUpdateRule2RaceQuotaConflict(t *testing.T) {
	t.Parallel()
	// On an HA control plane, the quota admission of another kube-apiserver
	// updates the namespace's ResourceQuota between this create's read of
	// it and its write: the create is refused with a Conflict on the
	// resourcequotas. A create carries no resourceVersion, so that Conflict
	// is never the object's own: it is retried, and the next attempt reads
	// afresh. (The third revision returned it; the fourth retries it.)
	c := &calls{api: newCounters()}
	c.api.failCreates = []error{quotaConflict()}

	obj, res, err := c.createOrUpdate(desired(), c.claim("a"))
	require.NoError(t, err)
	assert.Equal(t, retry.ResultCreated, res)
	assert.Equal(t, []string{"get", "mutate", "create", "wait", "get", "mutate", "create"}, c.log)
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, 2, c.api.creates)
}

func TestCreateOrUpdateRule3(t *testing.T) {
	t.Parallel()
	t.Run("unchanged stored current costs nothing", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		obj, res, err := c.createOrUpdate(current, func(*Counter) error { c.log = append(c.log, "mutate"); return nil })
		require.NoError(t, err)
		assert.Equal(t, retry.ResultUnchanged, res)
		assert.Equal(t, []string{"mutate"}, c.log)
		assert.Zero(t, c.api.gets+c.api.updates+c.api.creates)
		assert.Equal(t, current, obj, "the copy mutate was given")
		assert.NotSame(t, current, obj)
	})
	t.Run("unchanged object read by get", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		obj, res, err := c.createOrUpdate(desired(), func(*Counter) error { c.log = append(c.log, "mutate"); return nil })
		require.NoError(t, err)
		assert.Equal(t, retry.ResultUnchanged, res)
		assert.Equal(t, []string{"get", "mutate"}, c.log)
		assert.Equal(t, "1", obj.ResourceVersion)
	})
	t.Run("conflict is retried with a fresh get", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		c.api.touch("jobs")
		obj, res, err := c.createOrUpdate(current, c.claim("a"))
		require.NoError(t, err)
		assert.Equal(t, retry.ResultUpdated, res)
		assert.Equal(t, []string{"mutate", "update", "wait", "get", "mutate", "update"}, c.log)
		assert.Equal(t, 100, obj.Count)
	})
	t.Run("apply conflict is not retried", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		applyErr := applyConflict()
		update := func(context.Context, *Counter) (*Counter, error) {
			c.log = append(c.log, "update")
			return nil, applyErr
		}
		obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, desired(), c.get, c.claim("a"), c.create, update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
		assert.Same(t, applyErr, err)
		assert.Equal(t, retry.ResultUnchanged, res)
		assert.Nil(t, obj)
		assert.Equal(t, []string{"get", "mutate", "update"}, c.log)
	})
}

func TestCreateOrUpdateRule4ErrorsReturnedAsIs(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(counterResource, "jobs", errors.New("no"))
	nsGone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
	mutateErr := errors.New("invalid spec")
	invalid := apierrors.NewBadRequest("bad")
	cases := []struct {
		name    string
		missing bool // the object does not exist
		get     error
		mutate  error
		create  error
		update  error
		log     []string
	}{
		{name: "get", get: forbidden, log: []string{"get"}},
		{name: "mutate on the update path", mutate: mutateErr, log: []string{"get", "mutate"}},
		{name: "mutate on the create path", missing: true, mutate: mutateErr, log: []string{"get", "mutate"}},
		{name: "create", missing: true, create: nsGone, log: []string{"get", "mutate", "create"}},
		{name: "update", update: invalid, log: []string{"get", "mutate", "update"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCalls()
			if tc.missing {
				c.api = newCounters()
			}
			get := func(ctx context.Context) (*Counter, error) {
				if tc.get != nil {
					c.log = append(c.log, "get")
					return nil, tc.get
				}
				return c.get(ctx)
			}
			mutate := func(obj *Counter) error {
				c.log = append(c.log, "mutate")
				obj.Owner = "a"
				return tc.mutate
			}
			create := func(ctx context.Context, obj *Counter) (*Counter, error) {
				if tc.create != nil {
					c.log = append(c.log, "create")
					return nil, tc.create
				}
				return c.create(ctx, obj)
			}
			update := func(ctx context.Context, obj *Counter) (*Counter, error) {
				if tc.update != nil {
					c.log = append(c.log, "update")
					return nil, tc.update
				}
				return c.update(ctx, obj)
			}
			want := firstErr(tc.get, tc.mutate, tc.create, tc.update)
			obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, desired(), get, mutate, create, update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			assert.Same(t, want, err, "returned as it is")
			assert.Nil(t, obj)
			assert.Equal(t, retry.ResultUnchanged, res)
			assert.Equal(t, tc.log, c.log, "never retried")
		})
	}
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestCreateOrUpdateRule4Exhaustion(t *testing.T) {
	t.Parallel()
	// Each retriable error, met on every attempt, comes back itself when the
	// attempts run out.
	for _, tc := range []struct {
		name   string
		stored bool   // the object exists
		op     string // the call that fails every time
		err    func(n int) error
	}{
		{"Conflict", true, "update", conflict},
		{"Conflict from create", false, "create", conflict},
		{"AlreadyExists", false, "create", func(n int) error {
			return apierrors.NewAlreadyExists(counterResource, "jobs-"+strconv.Itoa(n))
		}},
		{"NotFound from update", true, "update", func(n int) error {
			return apierrors.NewNotFound(counterResource, "jobs-"+strconv.Itoa(n))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCalls()
			if !tc.stored {
				c.api = newCounters()
			}
			var last error
			fail := func(ctx context.Context, obj *Counter) (*Counter, error) {
				c.log = append(c.log, tc.op)
				last = tc.err(len(c.log))
				return nil, last
			}
			create, update := c.create, c.update
			if tc.op == "create" {
				create = fail
			} else {
				update = fail
			}
			b := retry.Backoff{Steps: 3, Duration: time.Millisecond}
			obj, res, err := retry.CreateOrUpdate(context.Background(), b, desired(), c.get, c.claim("a"), create, update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
			assert.True(t, err == last, "the last error itself: got %v, want %v", err, last)
			assert.Nil(t, obj)
			assert.Equal(t, retry.ResultUnchanged, res)
			assert.Equal(t, 3, strings.Count(strings.Join(c.log, " "), tc.op), "Steps attempts: %v", c.log)
		})
	}
}

func TestCreateOrUpdateRule5RejectsBadInput(t *testing.T) {
	t.Parallel()
	c := newCalls()
	var done int
	onDone := retry.WithOnDone(func(retry.DoneEvent) { done++ })
	var nilCtx context.Context
	ctx := context.Background()
	cases := []struct {
		name string
		call func() (*Counter, retry.Result, error)
		want string
	}{
		{"zero current", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, nil, c.get, c.claim("a"), c.create, c.update, onDone)
		}, "retry: current is the zero object; it must name the object to create or update"},
		{"nil get", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), nil, c.claim("a"), c.create, c.update, onDone)
		}, "retry: get is nil"},
		{"nil mutate", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), c.get, nil, c.create, c.update, onDone)
		}, "retry: mutate is nil"},
		{"nil create", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), c.get, c.claim("a"), nil, c.update, onDone)
		}, "retry: create is nil"},
		{"nil update", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), c.get, c.claim("a"), c.create, nil, onDone)
		}, "retry: update is nil"},
		{"invalid backoff", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.Backoff{}, desired(), c.get, c.claim("a"), c.create, c.update, onDone)
		}, "retry: invalid backoff: Steps 0 is below 1, so nothing would be attempted"},
		{"nil ctx", func() (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(nilCtx, retry.DefaultRetry, desired(), c.get, c.claim("a"), c.create, c.update, onDone)
		}, "retry: ctx is nil"},
	}
	for _, tc := range cases {
		obj, res, err := tc.call()
		require.Error(t, err, tc.name)
		assert.Equal(t, tc.want, err.Error(), tc.name)
		assert.Nil(t, obj, tc.name)
		assert.Equal(t, retry.ResultUnchanged, res, tc.name)
	}
	assert.Empty(t, c.log, "nothing called")
	assert.Zero(t, c.api.gets+c.api.updates+c.api.creates)
	assert.Zero(t, done, "no OnDone for an invalid argument")

	calls := 0
	obj, res, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, &noMeta{},
		func(context.Context) (*noMeta, error) { calls++; return nil, nil },
		func(*noMeta) error { calls++; return nil },
		func(context.Context, *noMeta) (*noMeta, error) { calls++; return nil, nil },
		func(context.Context, *noMeta) (*noMeta, error) { calls++; return nil, nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retry: current, a *retry_test.noMeta, has no object metadata")
	assert.Nil(t, obj)
	assert.Equal(t, retry.ResultUnchanged, res)
	assert.Zero(t, calls)
}

func TestCreateOrUpdateGetReturnsNothing(t *testing.T) {
	t.Parallel()
	calls := 0
	obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, desired(),
		func(context.Context) (*Counter, error) { return nil, nil },
		func(*Counter) error { calls++; return nil },
		func(context.Context, *Counter) (*Counter, error) { calls++; return nil, nil },
		func(context.Context, *Counter) (*Counter, error) { calls++; return nil, nil })
	require.EqualError(t, err, "retry: get returned neither an object nor an error")
	assert.Nil(t, obj)
	assert.Equal(t, retry.ResultUnchanged, res)
	assert.Zero(t, calls)
}

func TestCreateOrUpdateDeepCopyOfAnotherType(t *testing.T) {
	t.Parallel()
	// The create path copies current: a copy of another type is an error
	// naming both types, and nothing is created.
	calls := 0
	obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, &badCopy{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
		func(context.Context) (*badCopy, error) { return nil, apierrors.NewNotFound(counterResource, "jobs") },
		func(*badCopy) error { calls++; return nil },
		func(context.Context, *badCopy) (*badCopy, error) { calls++; return nil, nil },
		func(context.Context, *badCopy) (*badCopy, error) { calls++; return nil, nil })
	require.EqualError(t, err, "retry: DeepCopyObject of a *retry_test.badCopy returned a *retry_test.Counter")
	assert.Nil(t, obj)
	assert.Equal(t, retry.ResultUnchanged, res)
	assert.Zero(t, calls)
}

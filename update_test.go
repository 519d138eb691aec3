package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kuberetry/retry"
)

// calls is an UpdateOnConflict harness over the counters store: it logs
// every call of get, mutate and update in order.
type calls struct {
	api *counters
	log []string
}

func (c *calls) get(ctx context.Context) (*Counter, error) {
	c.log = append(c.log, "get")
	return c.api.Get(ctx, "jobs")
}

func (c *calls) update(ctx context.Context, obj *Counter) (*Counter, error) {
	c.log = append(c.log, "update")
	return c.api.Update(ctx, obj)
}

// claim returns a mutate that sets Owner, logging its call.
func (c *calls) claim(owner string) func(*Counter) error {
	return func(obj *Counter) error {
		c.log = append(c.log, "mutate")
		obj.Owner = owner
		return nil
	}
}

// cached returns a copy of the stored object, as an informer's lister holds
// it; the test then changes the store behind it, or not.
func (c *calls) cached(t *testing.T) *Counter {
	t.Helper()
	obj, err := c.api.Get(context.Background(), "jobs")
	require.NoError(t, err)
	c.api.gets = 0
	return obj
}

func newCalls() *calls { return &calls{api: newCounters("jobs")} }

func TestUpdateOnConflictFreshCurrentIsOneRequest(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	before := current.DeepCopyObject()
	var rec recorder

	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&rec))
	require.NoError(t, err)
	assert.Equal(t, []string{"mutate", "update"}, c.log, "no get: the first attempt works on a copy of current")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, "2", obj.ResourceVersion, "update's object is returned")
	assert.Equal(t, before, current, "current is never modified")
	assert.NotSame(t, current, obj)
	assert.Empty(t, rec.waits)
}

func TestUpdateOnConflictStaleCurrentReadsAfresh(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs") // the cache is now stale
	before := current.DeepCopyObject()
	var rec recorder

	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update,
		retry.WithSleeper(&rec), retry.WithRand(func() float64 { return 0 }))
	require.NoError(t, err)
	assert.Equal(t, []string{"mutate", "update", "get", "mutate", "update"}, c.log)
	assert.Equal(t, 100, obj.Count, "the retry worked on the object read afresh")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, before, current, "current is never modified")
	noJitter := retry.DefaultRetry
	noJitter.Jitter = 0
	assert.Equal(t, oracleSteps(noJitter, 1), rec.waits)
}

func TestUpdateOnConflictZeroCurrentGetsFirst(t *testing.T) {
	t.Parallel()
	c := newCalls()
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, c.get, c.claim("a"), c.update)
	require.NoError(t, err)
	assert.Equal(t, []string{"get", "mutate", "update"}, c.log)
	assert.Equal(t, "a", obj.Owner)
}

func TestUpdateOnConflictSkipsNoOpWrite(t *testing.T) {
	t.Parallel()
	t.Run("first attempt", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		current.Owner = "a" // as if an earlier reconcile had set it
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update)
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate"}, c.log, "nothing changed, nothing written")
		assert.Equal(t, current, obj, "the object as current gave it")
		assert.NotSame(t, current, obj, "a copy: the caller may change it without touching the cache")
	})
	t.Run("after a conflict", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		c.api.objs["jobs"].Owner = "a" // another writer already made the change
		c.api.objs["jobs"].ResourceVersion = "9"
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&recorder{}))
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate", "update", "get", "mutate"}, c.log)
		assert.Equal(t, "9", obj.ResourceVersion, "get's object")
	})
	t.Run("semantic equality", func(t *testing.T) {
		t.Parallel()
		// A nil map and an empty one are semantically equal: no write.
		c := newCalls()
		current := c.cached(t)
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, func(obj *Counter) error {
			c.log = append(c.log, "mutate")
			obj.Labels = map[string]string{}
			return nil
		}, c.update)
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate"}, c.log)
		assert.NotNil(t, obj.Labels)
	})
}

func TestUpdateOnConflictErrorsReturnedAsIs(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "counters"}, "jobs", errors.New("no"))
	conflictErr := conflict(7)
	tests := []struct {
		name    string
		current bool // start from a cached object
		stale   bool // and change the store behind it
		setup   func(c *calls) (mutate func(*Counter) error, want error)
		wantLog []string
	}{
		{
			name: "get's error",
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{forbidden}
				return c.claim("a"), forbidden
			},
			wantLog: []string{"get"},
		},
		{
			name: "get's Conflict is not retried",
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{conflictErr}
				return c.claim("a"), conflictErr
			},
			wantLog: []string{"get"},
		},
		{
			name: "get's error on a retry", current: true, stale: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{forbidden}
				return c.claim("a"), forbidden
			},
			wantLog: []string{"mutate", "update", "get"},
		},
		{
			name: "mutate's error, nothing written", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				return func(obj *Counter) error {
					c.log = append(c.log, "mutate")
					obj.Owner = "half-done"
					return forbidden
				}, forbidden
			},
			wantLog: []string{"mutate"},
		},
		{
			name: "mutate's Conflict is not retried", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				return func(*Counter) error { c.log = append(c.log, "mutate"); return conflictErr }, conflictErr
			},
			wantLog: []string{"mutate"},
		},
		{
			name: "update's error other than Conflict", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.beforeUpdate = func() { delete(c.api.objs, "jobs") }
				return c.claim("a"), nil // a NotFound, checked below
			},
			wantLog: []string{"mutate", "update"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCalls()
			var current *Counter
			if tt.current {
				current = c.cached(t)
			}
			if tt.stale {
				c.api.touch("jobs")
			}
			mutate, want := tt.setup(c)
			written := c.api.version
			var rec recorder
			obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, mutate, c.update, retry.WithSleeper(&rec))
			if want != nil {
				assert.Same(t, want, err)
			} else {
				assert.True(t, apierrors.IsNotFound(err), "update's NotFound as is, got %v", err)
			}
			assert.Nil(t, obj, "the zero T with an error")
			assert.Equal(t, tt.wantLog, c.log)
			assert.Equal(t, written, c.api.version, "nothing written")
			if tt.current {
				assert.Empty(t, current.Owner, "current is never modified")
			}
		})
	}
}

func TestUpdateOnConflictExhaustion(t *testing.T) {
	t.Parallel()
	c := newCalls()
	var last error
	c.api.beforeUpdate = func() { c.api.touch("jobs") } // every write loses the race
	update := func(ctx context.Context, obj *Counter) (*Counter, error) {
		out, err := c.update(ctx, obj)
		last = err
		return out, err
	}
	var rec recorder
	b := retry.Backoff{Steps: 3, Duration: time.Second, Factor: 2}
	obj, err := retry.UpdateOnConflict(context.Background(), b, nil, c.get, c.claim("a"), update, retry.WithSleeper(&rec))
	require.True(t, apierrors.IsConflict(err))
	assert.Same(t, last, err, "the last Conflict itself")
	assert.Nil(t, obj)
	assert.Equal(t, []string{"get", "mutate", "update", "get", "mutate", "update", "get", "mutate", "update"}, c.log)
	assert.Equal(t, oracleSteps(b, 2), rec.waits)
}

func TestUpdateOnConflictNilGetWithCurrent(t *testing.T) {
	t.Parallel()
	// With no get, nothing could read the object afresh: a Conflict on the
	// first attempt is returned as it is, without a wait.
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs")
	var rec recorder
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, nil, c.claim("a"), c.update, retry.WithSleeper(&rec))
	assert.True(t, apierrors.IsConflict(err))
	assert.Nil(t, obj)
	assert.Equal(t, []string{"mutate", "update"}, c.log)
	assert.Empty(t, rec.waits)

	// And without a Conflict it writes as usual.
	c = newCalls()
	obj, err = retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, c.cached(t), nil, c.claim("a"), c.update)
	require.NoError(t, err)
	assert.Equal(t, "a", obj.Owner)
}

func TestUpdateOnConflictGetReturnsNothing(t *testing.T) {
	t.Parallel()
	called := false
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil,
		func(context.Context) (*Counter, error) { return nil, nil },
		func(*Counter) error { called = true; return nil },
		func(context.Context, *Counter) (*Counter, error) { called = true; return nil, nil })
	require.Error(t, err)
	assert.Equal(t, "retry: get returned neither an object nor an error", err.Error())
	assert.Nil(t, obj)
	assert.False(t, called, "mutate and update are not called")
}

func TestUpdateOnConflictRejectsBadInput(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	var nilCtx context.Context
	tests := []struct {
		name string
		run  func() (*Counter, error)
		want string // the message names what is wrong
	}{
		{"nil get and zero current", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, nil, c.claim("a"), c.update)
		}, "get is nil"},
		{"nil mutate", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, nil, c.update)
		}, "mutate is nil"},
		{"nil update", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), nil)
		}, "update is nil"},
		{"nil ctx", func() (*Counter, error) {
			return retry.UpdateOnConflict(nilCtx, retry.DefaultRetry, current, c.get, c.claim("a"), c.update)
		}, "ctx is nil"},
		{"zero Backoff", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.Backoff{}, current, c.get, c.claim("a"), c.update)
		}, "Steps 0"},
		{"NaN Factor", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 2, Factor: math.NaN()}, current, c.get, c.claim("a"), c.update)
		}, "Factor NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj *Counter
			var err error
			require.NotPanics(t, func() { obj, err = tt.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			assert.Nil(t, obj)
		})
	}
	assert.Empty(t, c.log, "nothing called")
	assert.Zero(t, c.api.gets+c.api.updates)
}

func TestUpdateOnConflictContextEndsBetweenAttempts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	shutdown := errors.New("controller shutting down")
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs")
	rec := recorder{hook: func() { cancel(shutdown) }}
	obj, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, shutdown)
	assert.True(t, apierrors.IsConflict(err), "the last Conflict is wrapped too")
	assert.Nil(t, obj)
	assert.Equal(t, []string{"mutate", "update"}, c.log, "no attempt after ctx ended")
	assert.Len(t, rec.waits, 1)
}

func TestUpdateOnConflictOptions(t *testing.T) {
	t.Parallel()
	// The loop's options apply: every wait bounded, every retry reported.
	c := newCalls()
	c.api.beforeUpdate = func() {
		if c.api.updates < 3 {
			c.api.touch("jobs")
		}
	}
	var rec recorder
	var events []retry.RetryEvent
	obj, err := retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 5, Duration: time.Second, Factor: 10}, nil,
		c.get, c.claim("a"), c.update,
		retry.WithSleeper(&rec), retry.WithMaxDelay(3*time.Second),
		retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
	require.NoError(t, err)
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, 200, obj.Count)
	assert.Equal(t, []time.Duration{time.Second, 3 * time.Second}, rec.waits)
	require.Len(t, events, 2)
	for i, e := range events {
		assert.Equal(t, i+1, e.Attempt)
		assert.True(t, apierrors.IsConflict(e.Err))
	}
}

// noSleep is a Sleeper that returns at once, safe for concurrent use.
type noSleep struct{}

func (noSleep) Sleep(time.Duration) {}

// syncCounters is counters behind a lock, for concurrent callers.
type syncCounters struct {
	mu  sync.Mutex
	api *counters
}

func (s *syncCounters) get(ctx context.Context) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.Get(ctx, "jobs")
}

func (s *syncCounters) update(ctx context.Context, obj *Counter) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.Update(ctx, obj)
}

func TestUpdateOnConflictSharedCurrent(t *testing.T) {
	t.Parallel()
	// Many workers start from one cached object, as from one informer: with
	// the race detector on, a write to it would be reported.
	s := &syncCounters{api: newCounters("jobs")}
	current, err := s.get(context.Background())
	require.NoError(t, err)
	const workers = 8
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 50}, current, s.get,
				func(obj *Counter) error {
					obj.Count++
					obj.Labels = map[string]string{"by": strconv.Itoa(i)}
					return nil
				},
				s.update, retry.WithSleeper(noSleep{}))
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, workers, s.api.objs["jobs"].Count, "every increment landed once")
	assert.Equal(t, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1"}}, current)
}

// badCopy is an Object whose DeepCopyObject returns another type.
type badCopy struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (*badCopy) DeepCopyObject() runtime.Object { return &Counter{} }

func TestUpdateOnConflictDeepCopyOfAnotherType(t *testing.T) {
	t.Parallel()
	want := "retry: DeepCopyObject of a *retry_test.badCopy returned a *retry_test.Counter"
	for name, current := range map[string]*badCopy{"current": {}, "get": nil} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current,
				func(context.Context) (*badCopy, error) { return &badCopy{}, nil },
				func(*badCopy) error { calls++; return nil },
				func(_ context.Context, o *badCopy) (*badCopy, error) { calls++; return o, nil })
			require.Error(t, err)
			assert.Equal(t, want, err.Error())
			assert.Nil(t, obj)
			assert.Zero(t, calls, "neither mutate nor update is called")
		})
	}
}

func TestUpdateOnConflictComparesWithACopy(t *testing.T) {
	t.Parallel()
	// A mutate that also writes the cached object through another reference
	// (a bug of the caller's) must not make its change look like a no-op.
	c := newCalls()
	current := c.cached(t)
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, func(obj *Counter) error {
		obj.Owner = "a"
		current.Owner = "a"
		return nil
	}, c.update)
	require.NoError(t, err)
	assert.Equal(t, 1, c.api.updates, "the change was written")
	assert.Equal(t, "a", obj.Owner)
}

// create logs a create and passes it to the store.
func (c *calls) create(ctx context.Context, obj *Counter) (*Counter, error) {
	c.log = append(c.log, "create")
	return c.api.Create(ctx, obj)
}

// Sleep logs a wait, so that the log shows where each attempt ends.
func (c *calls) Sleep(time.Duration) { c.log = append(c.log, "wait") }

// desired is an object as a reconciler builds it: a name, no resourceVersion.
func desired() *Counter { return &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}} }

// createOrUpdate runs CreateOrUpdate over c with c as the sleeper and no
// jitter.
func (c *calls) createOrUpdate(current *Counter, mutate func(*Counter) error, opts ...retry.Option) (*Counter, retry.Result, error) {
	opts = append([]retry.Option{retry.WithSleeper(c), retry.WithRand(func() float64 { return 0 })}, opts...)
	return retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, current, c.get, mutate, c.create, c.update, opts...)
}

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
		retry.WithSleeper(c))
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
		obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, desired(), c.get, c.claim("a"), c.create, update, retry.WithSleeper(c))
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
		{name: "create conflict", missing: true, create: conflict(1), log: []string{"get", "mutate", "create"}},
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
			obj, res, err := retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, desired(), get, mutate, create, update, retry.WithSleeper(c))
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
			obj, res, err := retry.CreateOrUpdate(context.Background(), b, desired(), c.get, c.claim("a"), create, update, retry.WithSleeper(c))
			assert.True(t, err == last, "the last error itself: got %v, want %v", err, last)
			assert.Nil(t, obj)
			assert.Equal(t, retry.ResultUnchanged, res)
			assert.Equal(t, 3, strings.Count(strings.Join(c.log, " "), tc.op), "Steps attempts: %v", c.log)
		})
	}
}

// noMeta is a runtime.Object without object metadata.
type noMeta struct{ metav1.TypeMeta }

func (n *noMeta) DeepCopyObject() runtime.Object { c := *n; return &c }

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
			assert.Zero(t, c.api.updates+c.api.creates, "nothing written")
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
		})
	}
}

// applyConflict is the error the API server returns for a Server-Side Apply
// that sets a field another manager owns.
func applyConflict() error {
	return apierrors.NewApplyConflict([]metav1.StatusCause{{
		Type:    metav1.CauseTypeFieldManagerConflict,
		Message: `conflict with "manager-a": .data.key`,
		Field:   ".data.key",
	}}, `Apply failed with 1 conflict: conflict with "manager-a": .data.key`)
}

func TestIsApplyConflict(t *testing.T) {
	t.Parallel()
	staleWithCause := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid}}},
	}}
	invalidWithCause := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict}}},
	}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"apply conflict", applyConflict(), true},
		{"wrapped", fmt.Errorf("apply: %w", applyConflict()), true},
		{"joined, first", errors.Join(applyConflict(), conflict(1)), true},
		{"joined, after another API error", errors.Join(conflict(1), applyConflict()), false},
		{"stale resourceVersion", conflict(1), false},
		{"conflict with another cause", staleWithCause, false},
		{"cause without reason Conflict", invalidWithCause, false},
		{"not an API error", errors.New("conflict"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, retry.IsApplyConflict(tc.err))
			if tc.want {
				assert.True(t, apierrors.IsConflict(tc.err), "apierrors.IsConflict is true too")
				assert.False(t, retry.IsTransient(tc.err))
			}
		})
	}
}

func TestApplyConflictNotRetriedUnlikeClientGo(t *testing.T) {
	t.Parallel()
	b := retry.DefaultRetry
	applyErr := applyConflict()
	apply := func(calls *int) func() error {
		return func() error { *calls++; return applyErr }
	}

	var clientGo int
	wantClientGo := clientGoOnError(wait.Backoff(retry.Backoff{Steps: b.Steps}), apierrors.IsConflict, apply(&clientGo))
	assert.Equal(t, b.Steps, clientGo, "client-go's RetryOnConflict sends the losing apply Steps times")
	assert.Same(t, applyErr, wantClientGo)

	var plain, withCtx int
	var rec recorder
	err := retry.RetryOnConflict(b, apply(&plain), retry.WithSleeper(&rec))
	assert.Same(t, applyErr, err, "returned as it is")
	assert.Equal(t, 1, plain, "RetryOnConflict sends it once")
	err = retry.RetryOnConflictWithContext(context.Background(), b, func(context.Context) error { return apply(&withCtx)() }, retry.WithSleeper(&rec))
	assert.Same(t, applyErr, err)
	assert.Equal(t, 1, withCtx, "RetryOnConflictWithContext sends it once")
	assert.Empty(t, rec.waits)

	c := newCalls()
	update := func(context.Context, *Counter) (*Counter, error) {
		c.log = append(c.log, "update")
		return nil, applyErr
	}
	_, err = retry.UpdateOnConflict(context.Background(), b, nil, c.get, c.claim("a"), update, retry.WithSleeper(c))
	assert.Same(t, applyErr, err)
	assert.Equal(t, []string{"get", "mutate", "update"}, c.log, "UpdateOnConflict does not retry it")
}

func TestUnstructuredNumbersComparedByValue(t *testing.T) {
	t.Parallel()
	stored := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "ns", "resourceVersion": "7"},
			"spec": map[string]any{
				"replicas": int64(3),
				"template": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "web", "ports": []any{map[string]any{"containerPort": int64(8080)}}},
				}}},
				"big":  int64(1<<53 + 1),
				"args": []any{},
			},
		}}
	}
	// set assigns v itself: SetNestedField refuses Go types JSON has not,
	// such as int, which a caller may still put there.
	set := func(v any, path ...string) func(*unstructured.Unstructured) error {
		return func(u *unstructured.Unstructured) error {
			m := u.Object
			for _, p := range path[:len(path)-1] {
				next, ok := m[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[p] = next
				}
				m = next
			}
			m[path[len(path)-1]] = v
			return nil
		}
	}
	setPort := func(v any) func(*unstructured.Unstructured) error {
		return func(u *unstructured.Unstructured) error {
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
			c.(map[string]any)["ports"].([]any)[0].(map[string]any)["containerPort"] = v
			return nil
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*unstructured.Unstructured) error
		write  bool
	}{
		{"float64 of the stored int64", set(float64(3), "spec", "replicas"), false},
		{"int of the stored int64", set(3, "spec", "replicas"), false},
		{"uint32 of the stored int64", set(uint32(3), "spec", "replicas"), false},
		{"float64 in a list in a map", setPort(float64(8080)), false},
		{"int32 in a list in a map", setPort(int32(8080)), false},
		{"json.Number of the stored int64", set(json.Number("3"), "spec", "replicas"), false},
		{"null for the stored empty list", set([]any(nil), "spec", "args"), true},
		{"null for a stored number", set(nil, "spec", "replicas"), true},
		{"another string", set("apps/v2", "apiVersion"), true},
		{"a bool for a number", set(true, "spec", "replicas"), true},
		{"a new key", set([]any{}, "spec", "template", "spec", "volumes"), true},
		{"another value", set(float64(4), "spec", "replicas"), true},
		{"a fraction", set(3.5, "spec", "replicas"), true},
		{"a float that rounds to the stored int64", set(float64(1<<53), "spec", "big"), true},
		{"a string of the number", set("3", "spec", "replicas"), true},
		{"another port in the list", setPort(float64(8081)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := stored()
			snapshot := cache.DeepCopy()
			puts := 0
			update := func(_ context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				puts++
				return u, nil
			}
			get := func(context.Context) (*unstructured.Unstructured, error) { return cache, nil }
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, get, tc.mutate, update)
			require.NoError(t, err)
			want := 0
			if tc.write {
				want = 1
			}
			assert.Equal(t, want, puts, "writes sent")
			assert.Equal(t, snapshot, cache, "get's object is not modified")
		})
	}
}

// Limit is a typed object with a Quantity, which equality.Semantic compares
// by value.
type Limit struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Max resource.Quantity
}

func (l *Limit) DeepCopyObject() runtime.Object {
	out := *l
	l.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Max = l.Max.DeepCopy()
	return &out
}

func TestTypedQuantityComparedByValue(t *testing.T) {
	t.Parallel()
	current := &Limit{ObjectMeta: metav1.ObjectMeta{Name: "cpu", ResourceVersion: "1"}, Max: resource.MustParse("1")}
	for _, tc := range []struct {
		value string
		write bool
	}{{"1000m", false}, {"1", false}, {"1001m", true}} {
		puts := 0
		_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, nil,
			func(l *Limit) error { l.Max = resource.MustParse(tc.value); return nil },
			func(_ context.Context, l *Limit) (*Limit, error) { puts++; return l, nil })
		require.NoError(t, err)
		assert.Equal(t, tc.write, puts == 1, "%s after 1", tc.value)
	}
}

func TestUnstructuredNoOpIsTheSameJSON(t *testing.T) {
	t.Parallel()
	// The oracle: a write is skipped exactly when the content mutate leaves
	// encodes to the same JSON as the content read. Stored content has the
	// decoder's types; mutate puts in any Go number type, nil maps and
	// slices, and json.Number.
	rng := mrand.New(mrand.NewPCG(3, 4))
	for i := range 5000 {
		stored := map[string]any{"metadata": map[string]any{"name": "x"}, "spec": randStored(rng, 3)}
		want := map[string]any{"metadata": map[string]any{"name": "x"}, "spec": randLike(rng, stored["spec"], 3)}
		puts := 0
		_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, &unstructured.Unstructured{Object: stored}, nil,
			func(u *unstructured.Unstructured) error { u.Object["spec"] = want["spec"]; return nil },
			func(_ context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				puts++
				return u, nil
			})
		require.NoError(t, err)
		a, err := json.Marshal(stored)
		require.NoError(t, err)
		b, err := json.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, !bytes.Equal(a, b), puts == 1, "case %d: %s -> %s", i, a, b)
	}
}

// randStored returns random unstructured content as a JSON decoder makes it.
func randStored(rng *mrand.Rand, depth int) any {
	switch k := rng.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return rng.IntN(2) == 0
	case k == 2:
		return []string{"a", "b", ""}[rng.IntN(3)]
	case k == 3:
		return int64(rng.IntN(3) - 1)
	case k == 4:
		return float64(rng.IntN(3)) + 0.5
	case k == 5:
		return int64(1<<53 + rng.IntN(2))
	case k == 6 && depth > 0:
		m := map[string]any{}
		for range rng.IntN(3) {
			m[[]string{"a", "b", "c"}[rng.IntN(3)]] = randStored(rng, depth-1)
		}
		return m
	case k == 7 && depth > 0:
		l := []any{}
		for range rng.IntN(3) {
			l = append(l, randStored(rng, depth-1))
		}
		return l
	}
	return "s"
}

// randLike returns v as a caller might set it again: often the same value
// in another Go type, sometimes a change.
func randLike(rng *mrand.Rand, v any, depth int) any {
	if rng.IntN(6) == 0 {
		return randStored(rng, depth)
	}
	switch x := v.(type) {
	case int64:
		switch rng.IntN(6) {
		case 0:
			return float64(x) // rounds 2^53+1 to 2^53: a change
		case 1:
			return json.Number(strconv.FormatInt(x, 10))
		case 2:
			return int(x)
		case 3:
			if x >= 0 {
				return uint32(x)
			}
			return uint64(math.MaxUint64) // -1 is not MaxUint64
		case 4:
			return int8(x)
		}
		return x
	case float64:
		if rng.IntN(2) == 0 {
			return float32(x)
		}
		return x
	case map[string]any:
		if len(x) == 0 && rng.IntN(3) == 0 {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = randLike(rng, e, depth-1)
		}
		return m
	case []any:
		if len(x) == 0 && rng.IntN(3) == 0 {
			return []any(nil)
		}
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = randLike(rng, e, depth-1)
		}
		return l
	}
	return v
}

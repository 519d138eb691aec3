package retry_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// counterClient is the counters store behind the method set of a
// client-go typed client, as Update, UpdateStatus, Ensure and Patch take
// it. It logs its calls and the patch types it is given.
type counterClient struct {
	api        *counters
	log        []string
	patchTypes []types.PatchType
	// stall names a call ("get", "update", ...) whose next one stalls, as
	// on a server that never answers: it returns ctx's error when ctx ends,
	// sending nothing to the store.
	stall string
}

// call logs a call of verb, marked when its options are not the zero
// value (the typed forms pass none), and reports the error of one that
// stalled.
func (c *counterClient) call(ctx context.Context, verb string, opts any) error {
	logged := verb
	if !reflect.ValueOf(opts).IsZero() {
		logged += " with options"
	}
	c.log = append(c.log, logged)
	if c.stall != verb {
		return nil
	}
	c.stall = ""
	<-ctx.Done()
	return ctx.Err()
}

var _ retry.EnsureClient[*Counter] = (*counterClient)(nil)

var _ retry.UpdateStatusClient[*Counter] = (*counterClient)(nil)

var _ retry.PatchClient[*Counter] = (*counterClient)(nil)

func newCounterClient(names ...string) *counterClient {
	return &counterClient{api: newCounters(names...)}
}

func (c *counterClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*Counter, error) {
	if err := c.call(ctx, "get", opts); err != nil {
		return nil, err
	}
	return c.api.Get(ctx, name)
}

func (c *counterClient) Create(ctx context.Context, obj *Counter, opts metav1.CreateOptions) (*Counter, error) {
	if err := c.call(ctx, "create", opts); err != nil {
		return nil, err
	}
	return c.api.Create(ctx, obj)
}

func (c *counterClient) Update(ctx context.Context, obj *Counter, opts metav1.UpdateOptions) (*Counter, error) {
	if err := c.call(ctx, "update", opts); err != nil {
		return nil, err
	}
	return c.api.Update(ctx, obj)
}

func (c *counterClient) UpdateStatus(ctx context.Context, obj *Counter, opts metav1.UpdateOptions) (*Counter, error) {
	if err := c.call(ctx, "updateStatus", opts); err != nil {
		return nil, err
	}
	return c.api.UpdateStatus(ctx, obj)
}

func (c *counterClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*Counter, error) {
	if err := c.call(ctx, "patch", opts); err != nil {
		return nil, err
	}
	c.patchTypes = append(c.patchTypes, pt)
	if len(subresources) > 0 {
		return nil, apierrors.NewBadRequest("no subresources here")
	}
	return c.api.Patch(ctx, name, data)
}

// hooks records what a loop did: its attempts and their errors, through
// its fn (or get, mutate and update), and its waits, OnRetry and OnDone
// calls, through the options it returns.
type hooks struct {
	succeedAt int // the attempt that succeeds; 0: none
	calls     int // calls of fn, or of get, mutate, update and create
	errs      []error
	waits     []time.Duration
	retries   int
	done      []retry.DoneEvent
	order     []string // "retry" and "done" in the order they came
}

// attempt is an attempt of a plain fn: a distinct Conflict until succeedAt.
func (h *hooks) attempt() error {
	h.calls++
	if h.calls == h.succeedAt {
		return nil
	}
	err := conflict(len(h.errs) + 1)
	h.errs = append(h.errs, err)
	return err
}

func (h *hooks) options(extra ...retry.Option) []retry.Option {
	return append([]retry.Option{
		retry.WithSleeper(&fakeSleeper{hook: func(d time.Duration) { h.waits = append(h.waits, d) }}),
		retry.WithOnRetry(func(retry.RetryEvent) { h.retries++; h.order = append(h.order, "retry") }),
		retry.WithOnDone(func(e retry.DoneEvent) { h.done = append(h.done, e); h.order = append(h.order, "done") }),
	}, extra...)
}

// loopBackoff allows 5 attempts.
var loopBackoff = retry.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 2}

// everyLoop returns a runner for every loop of the package, each meeting a
// Conflict on every attempt until h.succeedAt, with h's options and extra
// ones.
func everyLoop() map[string]func(h *hooks, extra ...retry.Option) error {
	ctx := context.Background()
	// writes is the write loops' store: each update until succeedAt meets
	// another writer's change.
	writes := func(h *hooks) (*counters, func(context.Context) (*Counter, error), func(*Counter) error, func(context.Context, *Counter) (*Counter, error)) {
		api := newCounters("jobs")
		updates := 0
		api.beforeUpdate = func() {
			if updates++; updates != h.succeedAt {
				api.touch("jobs")
			}
		}
		api.beforePatch = api.beforeUpdate
		get := func(ctx context.Context) (*Counter, error) { h.calls++; return api.Get(ctx, "jobs") }
		mutate := func(c *Counter) error { h.calls++; c.Owner = "a"; return nil }
		update := func(ctx context.Context, c *Counter) (*Counter, error) {
			h.calls++
			return h.wrote(api.Update(ctx, c))
		}
		return api, get, mutate, update
	}
	typed := func(h *hooks) (hookedClient, func(*Counter) error) {
		api, _, mutate, _ := writes(h)
		return hookedClient{h: h, api: api}, mutate
	}
	return map[string]func(h *hooks, extra ...retry.Option) error{
		"OnError": func(h *hooks, extra ...retry.Option) error {
			return retry.OnError(loopBackoff, apierrors.IsConflict, h.attempt, h.options(extra...)...)
		},
		"RetryOnConflict": func(h *hooks, extra ...retry.Option) error {
			return retry.RetryOnConflict(loopBackoff, h.attempt, h.options(extra...)...)
		},
		"OnRetryAfterError": func(h *hooks, extra ...retry.Option) error {
			return retry.OnRetryAfterError(loopBackoff, apierrors.IsConflict, h.attempt, h.options(extra...)...)
		},
		"OnErrorWithContext": func(h *hooks, extra ...retry.Option) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, apierrors.IsConflict, func(context.Context) error { return h.attempt() }, h.options(extra...)...)
		},
		"RetryOnConflictWithContext": func(h *hooks, extra ...retry.Option) error {
			return retry.RetryOnConflictWithContext(ctx, loopBackoff, func(context.Context) error { return h.attempt() }, h.options(extra...)...)
		},
		"OnRetryAfterErrorWithContext": func(h *hooks, extra ...retry.Option) error {
			return retry.OnRetryAfterErrorWithContext(ctx, loopBackoff, apierrors.IsConflict, func(context.Context) error { return h.attempt() }, h.options(extra...)...)
		},
		"OnErrorValue": func(h *hooks, extra ...retry.Option) error {
			_, err := retry.OnErrorValue(ctx, loopBackoff, apierrors.IsConflict, func(context.Context) (int, error) { return 1, h.attempt() }, h.options(extra...)...)
			return err
		},
		"UpdateOnConflict": func(h *hooks, extra ...retry.Option) error {
			_, get, mutate, update := writes(h)
			_, err := retry.UpdateOnConflict(ctx, loopBackoff, nil, get, mutate, update, h.options(extra...)...)
			return err
		},
		"PatchOnConflict": func(h *hooks, extra ...retry.Option) error {
			api, get, mutate, _ := writes(h)
			patch := func(ctx context.Context, c *Counter, data []byte) (*Counter, error) {
				h.calls++
				return h.wrote(api.Patch(ctx, c.Name, data))
			}
			_, err := retry.PatchOnConflict(ctx, loopBackoff, nil, get, mutate, patch, h.options(extra...)...)
			return err
		},
		"Update": func(h *hooks, extra ...retry.Option) error {
			c, mutate := typed(h)
			_, err := retry.Update(ctx, loopBackoff, c, desired(), mutate, h.options(extra...)...)
			return err
		},
		"UpdateStatus": func(h *hooks, extra ...retry.Option) error {
			c, mutate := typed(h)
			_, err := retry.UpdateStatus(ctx, loopBackoff, c, desired(), func(o *Counter) error { o.Status = "x"; return mutate(o) }, h.options(extra...)...)
			return err
		},
		"Ensure": func(h *hooks, extra ...retry.Option) error {
			c, mutate := typed(h)
			_, _, err := retry.Ensure(ctx, loopBackoff, c, desired(), mutate, h.options(extra...)...)
			return err
		},
		"Patch": func(h *hooks, extra ...retry.Option) error {
			c, mutate := typed(h)
			_, err := retry.Patch(ctx, loopBackoff, c, desired(), mutate, h.options(extra...)...)
			return err
		},
		"CreateOrUpdate": func(h *hooks, extra ...retry.Option) error {
			api, get, mutate, update := writes(h)
			create := func(ctx context.Context, c *Counter) (*Counter, error) { h.calls++; return api.Create(ctx, c) }
			_, _, err := retry.CreateOrUpdate(ctx, loopBackoff, desired(), get, mutate, create, update, h.options(extra...)...)
			return err
		},
	}
}

// wrote keeps a write's error, for the tests that look at each attempt's.
func (h *hooks) wrote(obj *Counter, err error) (*Counter, error) {
	if err != nil {
		h.errs = append(h.errs, err)
	}
	return obj, err
}

// hookedClient is a typed client over api that counts each call in h and
// keeps each write's error.
type hookedClient struct {
	h   *hooks
	api *counters
}

func (c hookedClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*Counter, error) {
	c.h.calls++
	return c.api.Get(ctx, name)
}

func (c hookedClient) Create(ctx context.Context, obj *Counter, _ metav1.CreateOptions) (*Counter, error) {
	c.h.calls++
	return c.h.wrote(c.api.Create(ctx, obj))
}

func (c hookedClient) Update(ctx context.Context, obj *Counter, _ metav1.UpdateOptions) (*Counter, error) {
	c.h.calls++
	return c.h.wrote(c.api.Update(ctx, obj))
}

func (c hookedClient) UpdateStatus(ctx context.Context, obj *Counter, _ metav1.UpdateOptions) (*Counter, error) {
	c.h.calls++
	return c.h.wrote(c.api.UpdateStatus(ctx, obj))
}

func (c hookedClient) Patch(ctx context.Context, name string, _ types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*Counter, error) {
	c.h.calls++
	return c.h.wrote(c.api.Patch(ctx, name, data))
}

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

// create logs a create and passes it to the store.
func (c *calls) create(ctx context.Context, obj *Counter) (*Counter, error) {
	c.log = append(c.log, "create")
	return c.api.Create(ctx, obj)
}

// createOrUpdate runs CreateOrUpdate over c with c as the sleeper and no
// jitter.
func (c *calls) createOrUpdate(current *Counter, mutate func(*Counter) error, opts ...retry.Option) (*Counter, retry.Result, error) {
	opts = append([]retry.Option{retry.WithSleeper(&fakeSleeper{log: &c.log}), retry.WithRand(func() float64 { return 0 })}, opts...)
	return retry.CreateOrUpdate(context.Background(), retry.DefaultRetry, current, c.get, mutate, c.create, c.update, opts...)
}

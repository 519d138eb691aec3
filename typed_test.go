package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// typedForm runs one typed form, and the closure loop it is, over a
// counterClient.
type typedForm struct {
	name   string
	typed  func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error)
	closed func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error)
	write  string // the call that writes an existing object
}

// typedForms are Update, UpdateStatus, Ensure and Patch beside
// UpdateOnConflict, CreateOrUpdate and PatchOnConflict given the
// closures that the typed forms are documented to be, obj as current.
func typedForms() []typedForm {
	ctx := context.Background()
	opts := func(c *counterClient) []retry.Option {
		return []retry.Option{retry.WithSleeper(&fakeSleeper{log: &c.log})}
	}
	get := func(c *counterClient, obj *Counter) func(context.Context) (*Counter, error) {
		return func(ctx context.Context) (*Counter, error) { return c.Get(ctx, obj.Name, metav1.GetOptions{}) }
	}
	updated := func(obj *Counter, err error) (*Counter, retry.Result, error) {
		return obj, retry.ResultUnchanged, err // the update loops have no Result
	}
	return []typedForm{
		{"Update", func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.Update(ctx, retry.DefaultRetry, c, obj, mutate, opts(c)...))
		}, func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.UpdateOnConflict(ctx, retry.DefaultRetry, obj, get(c, obj), mutate,
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.Update(ctx, o, metav1.UpdateOptions{})
				}, opts(c)...))
		}, "update"},
		{"UpdateStatus", func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.UpdateStatus(ctx, retry.DefaultRetry, c, obj, mutate, opts(c)...))
		}, func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.UpdateOnConflict(ctx, retry.DefaultRetry, obj, get(c, obj), mutate,
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
				}, opts(c)...))
		}, "updateStatus"},
		{"Ensure", func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return retry.Ensure(ctx, retry.DefaultRetry, c, obj, mutate, opts(c)...)
		}, func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return retry.CreateOrUpdate(ctx, retry.DefaultRetry, obj, get(c, obj), mutate,
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.Create(ctx, o, metav1.CreateOptions{})
				},
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.Update(ctx, o, metav1.UpdateOptions{})
				}, opts(c)...)
		}, "update"},
		{"Patch", func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.Patch(ctx, retry.DefaultRetry, c, obj, mutate, opts(c)...))
		}, func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error) {
			return updated(retry.PatchOnConflict(ctx, retry.DefaultRetry, obj, get(c, obj), mutate,
				func(ctx context.Context, o *Counter, data []byte) (*Counter, error) {
					return c.Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{})
				}, opts(c)...))
		}, "patch"},
	}
}

func TestTypedFormsAreTheirLoops(t *testing.T) {
	t.Parallel()
	// Each typed form makes the calls its closure loop makes, and returns
	// what it returns, in every case; the first attempt reads exactly when
	// obj has no resourceVersion.
	claim := func(o *Counter) error { o.Owner, o.Status = "a", "claimed"; return nil }
	for _, tc := range []struct {
		name    string
		obj     func(c *counterClient) *Counter
		setup   func(c *counterClient)
		mutate  func(*Counter) error
		wantLog func(write string) []string // for the forms that find the object
	}{
		{"a fresh stored copy: no read", func(c *counterClient) *Counter { return stored(c) }, nil, claim,
			func(w string) []string { return []string{w} }},
		{"a built object: read first", func(*counterClient) *Counter { return desired() }, nil, claim,
			func(w string) []string { return []string{"get", w} }},
		{"a stale stored copy", func(c *counterClient) *Counter { o := stored(c); c.api.touch("jobs"); return o }, nil, claim,
			func(w string) []string { return []string{w, "wait", "get", w} }},
		{"no change", func(c *counterClient) *Counter { return stored(c) }, nil, func(*Counter) error { return nil },
			func(string) []string { return nil }},
		{"a built object, no change", func(*counterClient) *Counter { return desired() }, nil, func(*Counter) error { return nil },
			func(string) []string { return []string{"get"} }},
		{"mutate's error", func(*counterClient) *Counter { return desired() }, nil, func(*Counter) error { return errors.New("invalid") },
			func(string) []string { return []string{"get"} }},
		{"get's error", func(*counterClient) *Counter { return desired() },
			func(c *counterClient) {
				c.api.failGets = []error{apierrors.NewForbidden(counterResource, "jobs", errors.New("no"))}
			}, claim,
			func(string) []string { return []string{"get"} }},
		{"another writer before every write", func(*counterClient) *Counter { return desired() },
			func(c *counterClient) {
				c.api.beforeUpdate = func() { c.api.touch("jobs") }
				c.api.beforePatch = c.api.beforeUpdate
			}, claim,
			func(w string) []string { return strings.Split(strings.Repeat("get "+w+" wait ", 4)+"get "+w, " ") }},
	} {
		for _, form := range typedForms() {
			t.Run(tc.name+"/"+form.name, func(t *testing.T) {
				t.Parallel()
				run := func(f func(c *counterClient, obj *Counter, mutate func(*Counter) error) (*Counter, retry.Result, error)) (*counterClient, *Counter, *Counter, retry.Result, error) {
					c := newCounterClient("jobs")
					obj := tc.obj(c)
					if tc.setup != nil {
						tc.setup(c)
					}
					before := obj.DeepCopyObject()
					got, res, err := f(c, obj, tc.mutate)
					assert.Equal(t, before, obj, "obj is never modified")
					return c, c.api.objs["jobs"], got, res, err
				}
				tc1, stored1, got1, res1, err1 := run(form.typed)
				tc2, stored2, got2, res2, err2 := run(form.closed)
				assert.Equal(t, tc.wantLog(form.write), tc1.log, "the typed form's calls")
				assert.Equal(t, tc2.log, tc1.log, "the same calls as the closure loop")
				assert.Equal(t, fmt.Sprint(err2), fmt.Sprint(err1))
				assert.Equal(t, got2, got1)
				assert.Equal(t, res2, res1)
				assert.Equal(t, stored2, stored1, "the same object stored")
			})
		}
	}
}

// stored returns the stored object as a cache holds it.
func stored(c *counterClient) *Counter {
	obj, err := c.api.Get(context.Background(), "jobs")
	if err != nil {
		panic(err)
	}
	return obj
}

func TestTypedFormsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("UpdateStatus writes the status only", func(t *testing.T) {
		t.Parallel()
		c := newCounterClient("jobs")
		obj, err := retry.UpdateStatus(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner, o.Status = "a", "ready"; return nil })
		require.NoError(t, err)
		assert.Equal(t, []string{"get", "updateStatus"}, c.log)
		assert.Equal(t, "ready", obj.Status)
		assert.Empty(t, obj.Owner, "the store's status write keeps the rest as it was")
	})
	t.Run("Patch sends a merge patch of the change, locked", func(t *testing.T) {
		t.Parallel()
		c := newCounterClient("jobs")
		c.api.objs["jobs"].Count = 5
		obj, err := retry.Patch(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil })
		require.NoError(t, err)
		assert.Equal(t, []types.PatchType{types.MergePatchType}, c.patchTypes)
		assert.JSONEq(t, `{"metadata":{"resourceVersion":"1"},"owner":"a"}`, string(c.api.lastPatch))
		assert.Equal(t, 5, obj.Count)
		assert.Equal(t, "a", obj.Owner)
	})
	t.Run("Ensure creates from a built object", func(t *testing.T) {
		t.Parallel()
		c := newCounterClient()
		built := desired()
		built.Labels = map[string]string{"app": "jobs"}
		obj, res, err := retry.Ensure(ctx, retry.DefaultRetry, c, built, func(o *Counter) error { o.Owner = "a"; return nil })
		require.NoError(t, err)
		assert.Equal(t, retry.ResultCreated, res)
		assert.Equal(t, []string{"get", "create"}, c.log)
		assert.Equal(t, map[string]string{"app": "jobs"}, obj.Labels, "obj seeds the object created")
		assert.Equal(t, "a", obj.Owner)
	})
	t.Run("Ensure retries a quota admission's Conflict from create", func(t *testing.T) {
		t.Parallel()
		c := newCounterClient()
		c.api.failCreates = []error{quotaConflict()}
		obj, res, err := retry.Ensure(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil },
			retry.WithSleeper(&fakeSleeper{log: &c.log}))
		require.NoError(t, err)
		assert.Equal(t, retry.ResultCreated, res)
		assert.Equal(t, []string{"get", "create", "wait", "get", "create"}, c.log)
		assert.Equal(t, "a", obj.Owner)
	})
	t.Run("Ensure from a stored copy that was deleted meanwhile", func(t *testing.T) {
		t.Parallel()
		c := newCounterClient("jobs")
		obj := stored(c)
		delete(c.api.objs, "jobs")
		got, res, err := retry.Ensure(ctx, retry.DefaultRetry, c, obj, func(o *Counter) error { o.Owner = "a"; return nil },
			retry.WithSleeper(&fakeSleeper{log: &c.log}))
		require.NoError(t, err)
		assert.Equal(t, retry.ResultCreated, res)
		assert.Equal(t, []string{"update", "wait", "get", "create"}, c.log)
		assert.Equal(t, "a", got.Owner)
	})
}

// refusingClient is a typed client of any Object that counts its calls
// and serves none.
type refusingClient[T retry.Object] struct{ calls *int }

func (r refusingClient[T]) Get(context.Context, string, metav1.GetOptions) (T, error) {
	*r.calls++
	var zero T
	return zero, errors.New("called")
}

func (r refusingClient[T]) Create(_ context.Context, obj T, _ metav1.CreateOptions) (T, error) {
	*r.calls++
	return obj, errors.New("called")
}

func (r refusingClient[T]) Update(_ context.Context, obj T, _ metav1.UpdateOptions) (T, error) {
	*r.calls++
	return obj, errors.New("called")
}

func (r refusingClient[T]) UpdateStatus(_ context.Context, obj T, _ metav1.UpdateOptions) (T, error) {
	*r.calls++
	return obj, errors.New("called")
}

func (r refusingClient[T]) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (T, error) {
	*r.calls++
	var zero T
	return zero, errors.New("called")
}

// typedCalls runs every typed form with client c (nil: none), obj and
// mutate, and returns each form's error.
func typedCalls[T retry.Object](ctx context.Context, c *refusingClient[T], obj T, mutate func(T) error, opts ...retry.Option) map[string]error {
	var uc retry.UpdateClient[T]
	var sc retry.UpdateStatusClient[T]
	var ec retry.EnsureClient[T]
	var pc retry.PatchClient[T]
	if c != nil {
		uc, sc, ec, pc = c, c, c, c
	}
	return typedCallsOn(ctx, uc, sc, ec, pc, obj, mutate, opts...)
}

// typedCallsOn runs every typed form, each with its own client.
func typedCallsOn[T retry.Object](ctx context.Context, uc retry.UpdateClient[T], sc retry.UpdateStatusClient[T],
	ec retry.EnsureClient[T], pc retry.PatchClient[T], obj T, mutate func(T) error, opts ...retry.Option) map[string]error {
	errs := map[string]error{}
	_, errs["Update"] = retry.Update(ctx, retry.DefaultRetry, uc, obj, mutate, opts...)
	_, errs["UpdateStatus"] = retry.UpdateStatus(ctx, retry.DefaultRetry, sc, obj, mutate, opts...)
	_, _, errs["Ensure"] = retry.Ensure(ctx, retry.DefaultRetry, ec, obj, mutate, opts...)
	_, errs["Patch"] = retry.Patch(ctx, retry.DefaultRetry, pc, obj, mutate, opts...)
	return errs
}

func TestTypedFormsRejectBadInput(t *testing.T) {
	t.Parallel()
	calls := 0
	client := &refusingClient[*Counter]{calls: &calls}
	mutate := func(*Counter) error { calls++; return nil }
	named := desired()
	var nilCtx context.Context
	done := retry.WithOnDone(func(retry.DoneEvent) { calls++ })
	var unset *refusingClient[*Counter] // a client variable never set
	for _, tc := range []struct {
		name string
		errs map[string]error
		want string
	}{
		{"nil client", typedCalls(context.Background(), nil, named, mutate, done), "retry: the client c is nil"},
		{"a nil pointer as client", typedCallsOn[*Counter](context.Background(), unset, unset, unset, unset, named, mutate, done),
			"retry: the client c is nil"},
		{"zero obj", typedCalls(context.Background(), client, nil, mutate, done), "retry: obj is a nil *retry_test.Counter; it must name the object to write"},
		{"obj without a name", typedCalls(context.Background(), client, &Counter{ObjectMeta: metav1.ObjectMeta{GenerateName: "jobs-"}}, mutate, done),
			"retry: obj, a *retry_test.Counter, has no name; it must name the object to write"},
		{"nil mutate", typedCalls(context.Background(), client, named, nil, done), "retry: mutate is nil"},
		{"nil ctx", typedCalls(nilCtx, client, named, mutate, done), "retry: ctx is nil"},
		{"negative attempt timeout", typedCalls(context.Background(), client, named, mutate, retry.WithAttemptTimeout(-2)),
			"retry: WithAttemptTimeout(-2ns): the timeout must not be negative (0 means none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Len(t, tc.errs, 4)
			for form, err := range tc.errs {
				require.Error(t, err, form)
				assert.Equal(t, tc.want, err.Error(), form)
			}
		})
	}
	t.Run("obj without object metadata", func(t *testing.T) {
		t.Parallel()
		n := 0
		errs := typedCalls(context.Background(), &refusingClient[*noMeta]{calls: &n}, &noMeta{}, func(*noMeta) error { n++; return nil })
		for form, err := range errs {
			require.Error(t, err, form)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: obj, a *retry_test.noMeta, has no object metadata: "), "%s: %v", form, err)
		}
		assert.Zero(t, n, "nothing called")
	})
	assert.Zero(t, calls, "nothing called: no client method, no mutate, no OnDone")
}

// benchClient serves writes without allocating: every write returns the
// object it is given, as a server that stores it as sent would.
type benchClient struct{ stored *Counter }

func (b benchClient) Get(context.Context, string, metav1.GetOptions) (*Counter, error) {
	return b.stored, nil
}

func (benchClient) Create(_ context.Context, obj *Counter, _ metav1.CreateOptions) (*Counter, error) {
	return obj, nil
}

func (benchClient) Update(_ context.Context, obj *Counter, _ metav1.UpdateOptions) (*Counter, error) {
	return obj, nil
}

func (benchClient) UpdateStatus(_ context.Context, obj *Counter, _ metav1.UpdateOptions) (*Counter, error) {
	return obj, nil
}

func (b benchClient) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*Counter, error) {
	return b.stored, nil
}

// successPaths are the typed forms' success path beside their closure
// loops' (a fresh stored object, one write), the closures written as a
// caller writes them around a typed client, per call.
func successPaths() map[string][2]func() {
	ctx := context.Background()
	var c retry.EnsureClient[*Counter] = benchClient{stored: &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1"}}}
	var p retry.PatchClient[*Counter] = benchClient{stored: &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "2"}}}
	current := &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1"}}
	mutate := func(o *Counter) error { o.Count = 1; return nil }
	closures := func() (func(context.Context) (*Counter, error), func(context.Context, *Counter) (*Counter, error)) {
		return func(ctx context.Context) (*Counter, error) { return c.Get(ctx, current.Name, metav1.GetOptions{}) },
			func(ctx context.Context, o *Counter) (*Counter, error) {
				return c.Update(ctx, o, metav1.UpdateOptions{})
			}
	}
	return map[string][2]func(){
		"Update": {func() {
			get, update := closures()
			_, _ = retry.UpdateOnConflict(ctx, retry.DefaultRetry, current, get, mutate, update)
		}, func() {
			_, _ = retry.Update(ctx, retry.DefaultRetry, c, current, mutate)
		}},
		"Ensure": {func() {
			get, update := closures()
			_, _, _ = retry.CreateOrUpdate(ctx, retry.DefaultRetry, current, get, mutate,
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.Create(ctx, o, metav1.CreateOptions{})
				}, update)
		}, func() {
			_, _, _ = retry.Ensure(ctx, retry.DefaultRetry, c, current, mutate)
		}},
		"Patch": {func() {
			get, _ := closures()
			_, _ = retry.PatchOnConflict(ctx, retry.DefaultRetry, current, get, mutate,
				func(ctx context.Context, o *Counter, data []byte) (*Counter, error) {
					return p.Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{})
				})
		}, func() {
			_, _ = retry.Patch(ctx, retry.DefaultRetry, p, current, mutate)
		}},
	}
}

func TestTypedSuccessPathAllocations(t *testing.T) {
	// Not parallel: AllocsPerRun counts every goroutine's allocations.
	for name, paths := range successPaths() {
		closures, typed := testing.AllocsPerRun(100, paths[0]), testing.AllocsPerRun(100, paths[1])
		t.Logf("%s: %v allocations, its closure loop %v", name, typed, closures)
		assert.LessOrEqual(t, typed, closures, "%s allocates no more than its closure loop", name)
	}
}

func benchSuccessPath(b *testing.B, name string, typed int) {
	f := successPaths()[name][typed]
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f()
	}
}

func BenchmarkUpdateOnConflictSuccess(b *testing.B) { benchSuccessPath(b, "Update", 0) }
func BenchmarkUpdateSuccess(b *testing.B)           { benchSuccessPath(b, "Update", 1) }
func BenchmarkCreateOrUpdateSuccess(b *testing.B)   { benchSuccessPath(b, "Ensure", 0) }
func BenchmarkEnsureSuccess(b *testing.B)           { benchSuccessPath(b, "Ensure", 1) }
func BenchmarkPatchOnConflictSuccess(b *testing.B)  { benchSuccessPath(b, "Patch", 0) }
func BenchmarkPatchSuccess(b *testing.B)            { benchSuccessPath(b, "Patch", 1) }

package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// oracleSafe reports whether apimachinery's Step is well defined for b and
// should give exactly what ours gives: non-negative fields, no jitter (the
// random part differs), and a product Duration*Factor that fits an int64
// (beyond it Go's float-to-int conversion is implementation-defined).
func oracleSafe(b retry.Backoff) bool {
	return b.Duration >= 0 && b.Factor >= 0 && b.Jitter == 0 && b.Steps >= 0 && b.Cap >= 0 &&
		float64(b.Duration)*b.Factor < 1<<63
}

// t0 is the fake time the budget tests start at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sleepHook is a Sleeper that calls itself: the tests advance a fake clock
// and interleave other calls while a loop waits.
type sleepHook func(time.Duration)

func (f sleepHook) Sleep(d time.Duration) { f(d) }

var errDown = apierrors.NewServiceUnavailable("the apiserver is down")

func always(error) bool { return true }

// Counter is a small API object for the examples, shaped like every
// Kubernetes type: TypeMeta, ObjectMeta (which holds the resourceVersion)
// and its own fields. *Counter is a retry.Object.
type Counter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Count             int    `json:"count,omitempty"`
	Owner             string `json:"owner,omitempty"`
	Status            string `json:"status,omitempty"` // written by UpdateStatus only
}

// DeepCopyObject copies c, as the generated deep-copy functions do.
func (c *Counter) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// counters keeps Counters the way an API server does: Get returns a copy,
// and an Update that carries a resourceVersion other than the stored one
// fails with a 409 Conflict, as does a patch that names one; an Update
// without one is applied unconditionally, over whatever is stored, as the
// apiserver does for most kinds (ConfigMaps, Deployments, ...). Update keeps the stored status
// and UpdateStatus writes nothing else, as for a kind with a status
// subresource. It counts the requests it serves.
type counters struct {
	objs          map[string]*Counter
	version       int
	gets, updates int
	creates       int
	statusUpdates int
	patches       int
	lastPatch     []byte  // the data of the last patch served
	beforeUpdate  func()  // if set, runs before each update or status update: another writer
	beforeCreate  func()  // if set, runs before each create: another writer
	beforePatch   func()  // if set, runs before each patch: another writer
	failGets      []error // errors for the next gets, in order
	failCreates   []error // errors for the next creates, in order
	loseReply     int     // the number of the update that is applied but whose reply is lost
}

func newCounters(names ...string) *counters {
	s := &counters{objs: map[string]*Counter{}}
	for _, n := range names {
		s.version++
		s.objs[n] = &Counter{ObjectMeta: metav1.ObjectMeta{Name: n, ResourceVersion: strconv.Itoa(s.version)}}
	}
	return s
}

var counterResource = schema.GroupResource{Group: "example.com", Resource: "counters"}

func (s *counters) Get(_ context.Context, name string) (*Counter, error) {
	s.gets++
	if len(s.failGets) > 0 {
		err := s.failGets[0]
		s.failGets = s.failGets[1:]
		return nil, err
	}
	obj, ok := s.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, name)
	}
	return obj.DeepCopyObject().(*Counter), nil
}

func (s *counters) Update(_ context.Context, c *Counter) (*Counter, error) {
	s.updates++
	stored, err := s.replace(c)
	if err != nil {
		return nil, err
	}
	status := stored.Status
	stored = c.DeepCopyObject().(*Counter)
	stored.Status = status
	s.store(stored)
	if s.updates == s.loseReply {
		return nil, &url.Error{Op: "Put", URL: "https://apiserver/counters/" + c.Name, Err: io.EOF}
	}
	return stored.DeepCopyObject().(*Counter), nil
}

// Create stores a new Counter, as the API server does: AlreadyExists when
// the name is taken, and a refusal of an object that carries a
// resourceVersion.
func (s *counters) Create(_ context.Context, c *Counter) (*Counter, error) {
	s.creates++
	if s.beforeCreate != nil {
		s.beforeCreate()
	}
	if len(s.failCreates) > 0 {
		err := s.failCreates[0]
		s.failCreates = s.failCreates[1:]
		return nil, err
	}
	if c.ResourceVersion != "" {
		// The real apiserver answers with a 500 (v1.37).
		return nil, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	if _, ok := s.objs[c.Name]; ok {
		return nil, apierrors.NewAlreadyExists(counterResource, c.Name)
	}
	s.version++
	stored := c.DeepCopyObject().(*Counter)
	stored.ResourceVersion = strconv.Itoa(s.version)
	stored.UID = types.UID("uid-" + stored.ResourceVersion)
	s.objs[c.Name] = stored
	return stored.DeepCopyObject().(*Counter), nil
}

// UpdateStatus writes c's status, and nothing else, to the stored object,
// when c carries its resourceVersion.
func (s *counters) UpdateStatus(_ context.Context, c *Counter) (*Counter, error) {
	s.statusUpdates++
	stored, err := s.replace(c)
	if err != nil {
		return nil, err
	}
	stored = stored.DeepCopyObject().(*Counter)
	stored.Status = c.Status
	s.store(stored)
	return stored.DeepCopyObject().(*Counter), nil
}

// replace runs beforeUpdate and returns the stored object that c replaces,
// or the error the server gives a write of c: NotFound, or a Conflict when
// c carries a resourceVersion other than the stored one.
func (s *counters) replace(c *Counter) (*Counter, error) {
	if s.beforeUpdate != nil {
		s.beforeUpdate()
	}
	stored, ok := s.objs[c.Name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, c.Name)
	}
	if c.ResourceVersion != "" && c.ResourceVersion != stored.ResourceVersion {
		return nil, apierrors.NewConflict(counterResource, c.Name, errors.New("the object has been modified"))
	}
	return stored, nil
}

// store keeps obj at a new resourceVersion.
func (s *counters) store(obj *Counter) {
	s.version++
	obj.ResourceVersion = strconv.Itoa(s.version)
	s.objs[obj.Name] = obj
}

// Patch applies an RFC 7386 merge patch to the stored object, as the API
// server does: a patch that sets metadata.resourceVersion applies only to
// that version, else it fails with a 409 Conflict.
func (s *counters) Patch(_ context.Context, name string, data []byte) (*Counter, error) {
	s.patches++
	s.lastPatch = data
	if s.beforePatch != nil {
		s.beforePatch()
	}
	stored, ok := s.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(counterResource, name)
	}
	var patch any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if rv := patchVersion(patch); rv != "" && rv != stored.ResourceVersion {
		return nil, apierrors.NewConflict(counterResource, name, errors.New("the object has been modified"))
	}
	doc, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	var target any
	if err := json.Unmarshal(doc, &target); err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergeApply(target, patch))
	if err != nil {
		return nil, err
	}
	out := &Counter{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if out.Name != name {
		return nil, apierrors.NewBadRequest("the patch changes the name")
	}
	s.store(out)
	return out.DeepCopyObject().(*Counter), nil
}

// patchVersion returns the metadata.resourceVersion a merge patch sets, or "".
func patchVersion(patch any) string {
	p, _ := patch.(map[string]any)
	md, _ := p["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

// mergeApply is RFC 7386's MergePatch(target, patch), written from the
// RFC's pseudocode: an object patch merges member by member, a null
// member removes, anything else replaces. target is not modified.
func mergeApply(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := maps.Clone(t)
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergeApply(out[k], v)
		}
	}
	return out
}

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

// Sleep logs a wait, so that the log shows where each attempt ends.
func (c *counterClient) Sleep(time.Duration) { c.log = append(c.log, "wait") }

// touch is another writer: it changes name behind everyone's back.
func (s *counters) touch(name string) {
	s.version++
	obj := s.objs[name].DeepCopyObject().(*Counter)
	obj.Count += 100
	obj.ResourceVersion = strconv.Itoa(s.version)
	s.objs[name] = obj
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
		retry.WithSleeper(sleepHook(func(d time.Duration) { h.waits = append(h.waits, d) })),
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

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var _ retry.Sleeper = (*testingclock.FakeClock)(nil)

// recorder is a Sleeper that records every wait and then runs hook, if set.
type recorder struct {
	waits []time.Duration
	hook  func()
}

func (r *recorder) Sleep(d time.Duration) {
	r.waits = append(r.waits, d)
	if r.hook != nil {
		r.hook()
	}
}

// quotaConflict is the 409 that a kube-apiserver's ResourceQuota admission
// returns when another kube-apiserver updated the namespace's quota first.
func quotaConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "quota",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// conflict returns a distinct 409 Conflict, so tests can tell which attempt's
// error came back.
func conflict(n int) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, fmt.Sprintf("cm-%d", n), errors.New("the object has been modified"))
}

// script is a fn that returns its errors in order and then repeats the last.
type script struct {
	errs  []error
	calls int
}

func (s *script) fn() error {
	err := s.errs[min(s.calls, len(s.errs)-1)]
	s.calls++
	return err
}

func (s *script) ctxFn(context.Context) error { return s.fn() }

func conflicts(n int) *script {
	s := &script{}
	for i := range n {
		s.errs = append(s.errs, conflict(i+1))
	}
	return s
}

// oracleSteps returns the first n waits of wait.Backoff.Step for b.
func oracleSteps(b retry.Backoff, n int) []time.Duration {
	w := wait.Backoff(b)
	var out []time.Duration
	for range n {
		out = append(out, w.Step())
	}
	return out
}

// clientGoOnError is client-go's retry.OnError: the same loop over
// wait.ExponentialBackoff, kept here as the oracle because the root module
// does not depend on client-go.
func clientGoOnError(b wait.Backoff, retriable func(error) bool, fn func() error) error {
	var last error
	err := wait.ExponentialBackoff(b, func() (bool, error) {
		switch err := fn(); {
		case err == nil:
			return true, nil
		case retriable(err):
			last = err
			return false, nil
		default:
			return false, err
		}
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

var sink error

// valueScript is a value-returning fn: attempt i returns (i, errs[i-1]),
// repeating the last error.
func (s *script) valueFn(context.Context) (int, error) {
	err := s.fn()
	return s.calls, err
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

// noSleep is a Sleeper that returns at once, safe for concurrent use.
type noSleep struct{}

func (noSleep) Sleep(time.Duration) {}

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

// noMeta is a runtime.Object without object metadata.
type noMeta struct{ metav1.TypeMeta }

func (n *noMeta) DeepCopyObject() runtime.Object { c := *n; return &c }

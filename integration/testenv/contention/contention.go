// Package contention runs the read-modify-write workload that produces
// update conflicts: many writers incrementing one counter in one ConfigMap,
// each increment through a retry loop, the way controllers update an object
// they share. The integration tests assert on its results and the
// contention demo prints them.
package contention

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// CounterKey is the ConfigMap data key that holds the counter.
const CounterKey = "count"

// Loop is a retry loop under test: it calls fn until fn succeeds, fails
// for good, or the loop gives up, and returns what the loop returns. It
// adapts any retry helper (this library's, client-go's) to one shape.
type Loop func(ctx context.Context, fn func(context.Context) error) error

// UpdateLoop is a read-change-write loop shaped like
// retry.UpdateOnConflict: it starts from current (or from get when current
// is nil), applies mutate and writes with update, re-reading with get
// after a Conflict, and returns the object written.
type UpdateLoop func(ctx context.Context, current *corev1.ConfigMap,
	get func(context.Context) (*corev1.ConfigMap, error),
	mutate func(*corev1.ConfigMap) error,
	update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error),
) (*corev1.ConfigMap, error)

// UpdateOnConflict is retry.UpdateOnConflict with backoff b and opts, as
// an UpdateLoop.
func UpdateOnConflict(b retry.Backoff, opts ...retry.Option) UpdateLoop {
	return func(ctx context.Context, current *corev1.ConfigMap,
		get func(context.Context) (*corev1.ConfigMap, error),
		mutate func(*corev1.ConfigMap) error,
		update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error),
	) (*corev1.ConfigMap, error) {
		return retry.UpdateOnConflict(ctx, b, current, get, mutate, update, opts...)
	}
}

// Idiom is the Strategy of client-go's documented idiom (a Get, the
// change and an Update inside a conflict-retrying loop) on this library's
// RetryOnConflictWithContext with backoff b and opts.
func Idiom(name string, b retry.Backoff, opts ...retry.Option) Strategy {
	return Strategy{
		Name: name, Steps: b.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return retry.RetryOnConflictWithContext(ctx, b, fn, opts...)
		},
	}
}

// ClientGoIdiom is the Strategy of client-go's documented idiom on
// client-go's own retry.RetryOnConflict with backoff b.
func ClientGoIdiom(name string, b wait.Backoff) Strategy {
	return Strategy{
		Name: name, Steps: b.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return cgretry.RetryOnConflict(b, func() error { return fn(ctx) })
		},
	}
}

// Updating is the Strategy of retry.UpdateOnConflict with backoff b and
// opts, each increment starting from the object Config.Current gives.
func Updating(name string, b retry.Backoff, opts ...retry.Option) Strategy {
	return Strategy{Name: name, Steps: b.Steps, Update: UpdateOnConflict(b, opts...)}
}

// Typed is retry.Update with backoff b and the options opts returns, an
// UpdateLoop: current is the obj retry.Update starts from (a nil current,
// after a give-up, is an object with only its name, which retry.Update
// reads first), and get and update are its client's Get and Update. opts
// is called once per call, so that a call's options (a sleeper that keeps
// a schedule of its own) may be new each time.
func Typed(b retry.Backoff, opts func() []retry.Option) UpdateLoop {
	return func(ctx context.Context, current *corev1.ConfigMap,
		get func(context.Context) (*corev1.ConfigMap, error),
		mutate func(*corev1.ConfigMap) error,
		update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error),
	) (*corev1.ConfigMap, error) {
		obj := current
		if obj == nil {
			obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: nameOf}}
		}
		var o []retry.Option
		if opts != nil {
			o = opts()
		}
		return retry.Update(ctx, b, funcClient{get: get, update: update}, obj, mutate, o...)
	}
}

// nameOf stands for the counter's name in an object built for
// retry.Update: funcClient's Get ignores the name it is given, reading
// the counter of the run.
const nameOf = "counter"

// funcClient is a retry.UpdateClient of Run's get and update functions.
type funcClient struct {
	get    func(context.Context) (*corev1.ConfigMap, error)
	update func(context.Context, *corev1.ConfigMap) (*corev1.ConfigMap, error)
}

func (c funcClient) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	return c.get(ctx)
}

func (c funcClient) Update(ctx context.Context, obj *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	return c.update(ctx, obj)
}

// Strategy names a retry loop and the most attempts it may make per call.
// Exactly one of Loop, Update and ForWriter is set.
type Strategy struct {
	Name string
	// Steps is the backoff's Steps: no call may attempt more often.
	Steps int
	// Loop runs each increment as client-go documents it: a function that
	// reads the ConfigMap afresh and updates it, inside a retry loop.
	Loop Loop
	// Update runs each increment as one UpdateLoop call, starting from
	// the object Config.Current gives.
	Update UpdateLoop
	// ForWriter, when set, returns writer w's own Strategy (Loop or
	// Update set): each writer is then a process of its own as far as the
	// strategy knows, with its own random source and its own learned
	// state, nothing shared with the other writers.
	ForWriter func(w int) Strategy
}

// forWriter returns the Strategy writer w runs.
func (s Strategy) forWriter(w int) Strategy {
	if s.ForWriter == nil {
		return s
	}
	ws := s.ForWriter(w)
	ws.Name, ws.Steps = s.Name, s.Steps
	return ws
}

// Config is one run of the workload.
type Config struct {
	// Client creates the ConfigMap and reads it back.
	Client kubernetes.Interface
	// Writer, if set, returns the clientset writer w writes with (one of
	// its own, on an HA control plane); otherwise every writer uses
	// Client.
	Writer    func(w int) (kubernetes.Interface, error)
	Namespace string
	// Name is the ConfigMap to create and increment; it must not exist.
	Name string
	// Writers is the number of concurrent goroutines.
	Writers int
	// Updates is the number of increments each writer makes, one retry
	// loop call each.
	Updates int
	// Progress, if set, is called after every finished call with the
	// number of calls finished so far.
	Progress func(done int)
	// Current, for a Strategy with Update, returns the object writer w
	// starts its next increment from, or nil to make the loop read it
	// (e.g. an informer's lister, which may lag the server). The object
	// may be shared: Run checks that the loop leaves it untouched. When
	// Current is nil, each writer starts from the object its previous
	// successful update returned (the created object at first, nil after
	// a give-up): the freshest a writer can know without a request.
	Current func(w int) *corev1.ConfigMap
	// Requests, if set, counts the requests Client sends; Run reports
	// those sent while the writers ran.
	Requests *reqcount.Counter
}

// WriterConfigMaps returns each writer's ConfigMap client: of cfg.Writer's
// clientset, or of Client.
func (cfg Config) WriterConfigMaps() ([]typedcorev1.ConfigMapInterface, error) {
	cms := make([]typedcorev1.ConfigMapInterface, cfg.Writers)
	for w := range cms {
		client := cfg.Client
		if cfg.Writer != nil {
			var err error
			if client, err = cfg.Writer(w); err != nil {
				return nil, fmt.Errorf("writer %d's client: %w", w, err)
			}
		}
		cms[w] = client.CoreV1().ConfigMaps(cfg.Namespace)
	}
	return cms, nil
}

// Call is the record of one retry loop call.
type Call struct {
	Attempts  int
	Conflicts int // attempts that failed with a Conflict
	// Gets counts the ConfigMap reads the call made (one per attempt
	// for a Loop; for an UpdateLoop, those its get made).
	Gets int
	// Current says an UpdateLoop call was given a non-nil current.
	Current bool
	// CurrentModified says the call changed the current it was given.
	CurrentModified bool
	Err             error
	Latency         time.Duration
}

// Result is what one run produced.
type Result struct {
	Strategy string
	Writers  int
	Calls    []Call
	// Final is the counter's value read back after all writers finished.
	Final int
	Wall  time.Duration
	// Requests are the requests sent while the writers ran, when
	// Config.Requests counted them.
	Requests reqcount.Counts
}

// Run creates the ConfigMap at 0, lets cfg.Writers goroutines increment it
// cfg.Updates times each through s.Loop or s.Update, and reads the counter
// back. The ConfigMap is left in place; the caller deletes it (or its
// namespace).
//
// Each attempt reads the ConfigMap (a Loop always does; an UpdateLoop
// after a Conflict, or when it has no current), adds one and updates it
// with the resourceVersion it read, so an update that raced with another
// writer's fails with 409 Conflict, which is what the retry loops retry.
func Run(ctx context.Context, s Strategy, cfg Config) (Result, error) {
	set := 0
	for _, ok := range []bool{s.Loop != nil, s.Update != nil, s.ForWriter != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return Result{}, fmt.Errorf("strategy %s: set exactly one of Loop, Update and ForWriter", s.Name)
	}
	own := make([]Strategy, cfg.Writers)
	for w := range own {
		if own[w] = s.forWriter(w); (own[w].Loop == nil) == (own[w].Update == nil) {
			return Result{}, fmt.Errorf("strategy %s: writer %d's: set exactly one of Loop and Update", s.Name, w)
		}
	}
	cms := cfg.Client.CoreV1().ConfigMaps(cfg.Namespace)
	writers, err := cfg.WriterConfigMaps()
	if err != nil {
		return Result{}, err
	}
	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name},
		Data:       map[string]string{CounterKey: "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("create counter: %w", err)
	}

	// cms, in what follows, is the writer's own.
	get := func(ctx context.Context, cms typedcorev1.ConfigMapInterface, c *Call) (*corev1.ConfigMap, error) {
		c.Gets++
		return cms.Get(ctx, cfg.Name, metav1.GetOptions{})
	}
	update := func(ctx context.Context, cms typedcorev1.ConfigMapInterface, c *Call, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		cm, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			c.Conflicts++
		}
		// Returned as is: the loops recognize a Conflict by its type.
		return cm, err
	}
	increment := func(ctx context.Context, cms typedcorev1.ConfigMapInterface, c *Call) error {
		c.Attempts++
		cm, err := get(ctx, cms, c)
		if err != nil {
			return err
		}
		if err := add1(cm); err != nil {
			return err
		}
		_, err = update(ctx, cms, c, cm)
		return err
	}
	// incrementFrom is one UpdateLoop call, from current; it returns the
	// object written.
	incrementFrom := func(ctx context.Context, s Strategy, cms typedcorev1.ConfigMapInterface, c *Call, current *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		var before *corev1.ConfigMap
		if current != nil {
			c.Current = true
			before = current.DeepCopy()
		}
		cm, err := s.Update(ctx, current,
			func(ctx context.Context) (*corev1.ConfigMap, error) {
				cm, err := get(ctx, cms, c)
				if err != nil {
					c.Attempts++ // an attempt that ended in its read
				}
				return cm, err
			},
			func(cm *corev1.ConfigMap) error {
				c.Attempts++
				return add1(cm)
			},
			func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				return update(ctx, cms, c, cm)
			})
		if current != nil && !equality.Semantic.DeepEqual(before, current) {
			c.CurrentModified = true
		}
		return cm, err
	}

	res := Result{Strategy: s.Name, Writers: cfg.Writers, Calls: make([]Call, cfg.Writers*cfg.Updates)}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		finished int
		before   reqcount.Counts
	)
	if cfg.Requests != nil {
		before = cfg.Requests.Snapshot()
	}
	start := time.Now()
	for w := range cfg.Writers {
		wg.Go(func() {
			cms, s := writers[w], own[w]
			last := created // the object this writer's previous update returned
			for u := range cfg.Updates {
				c := &res.Calls[w*cfg.Updates+u]
				t0 := time.Now()
				switch {
				case s.Loop != nil:
					c.Err = s.Loop(ctx, func(ctx context.Context) error { return increment(ctx, cms, c) })
				case cfg.Current != nil:
					_, c.Err = incrementFrom(ctx, s, cms, c, cfg.Current(w))
				default:
					last, c.Err = incrementFrom(ctx, s, cms, c, last)
				}
				c.Latency = time.Since(t0)
				if cfg.Progress != nil {
					mu.Lock()
					finished++
					cfg.Progress(finished)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.Wall = time.Since(start)
	if cfg.Requests != nil {
		res.Requests = cfg.Requests.Snapshot().Sub(before)
	}

	cm, err := cms.Get(ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("read counter back: %w", err)
	}
	if res.Final, err = strconv.Atoi(cm.Data[CounterKey]); err != nil {
		return res, fmt.Errorf("counter %q: %w", cm.Data[CounterKey], err)
	}
	return res, nil
}

// add1 adds one to cm's counter.
func add1(cm *corev1.ConfigMap) error {
	n, err := strconv.Atoi(cm.Data[CounterKey])
	if err != nil {
		return fmt.Errorf("counter %q: %w", cm.Data[CounterKey], err)
	}
	cm.Data[CounterKey] = strconv.Itoa(n + 1)
	return nil
}

// Summary condenses a Result into the numbers the tests check and the demo
// prints.
type Summary struct {
	Strategy  string
	Writers   int
	Updates   int // calls made
	Succeeded int // calls that returned nil
	GaveUp    int // calls that returned an error
	// GaveUpNonConflict counts give-ups whose error is not a Conflict.
	GaveUpNonConflict int
	Conflicts         int // attempts that failed with a Conflict
	Attempts          int
	MaxAttempts       int // most attempts made by any one call
	Gets              int // reads of the ConfigMap by the calls
	// CurrentModified counts calls that changed the current they were
	// given (an informer's cache, in a controller).
	CurrentModified int
	P50, P99        time.Duration
	Wall            time.Duration
	Final           int
	// Requests counts the ConfigMap requests sent while the writers ran,
	// of every verb, when Config.Requests counted them; -1 when it did
	// not.
	Requests int
}

// RetriesPerUpdate is the mean number of attempts beyond the first.
func (s Summary) RetriesPerUpdate() float64 {
	if s.Updates == 0 {
		return 0
	}
	return float64(s.Attempts-s.Updates) / float64(s.Updates)
}

// RequestsPerUpdate is the number of ConfigMap requests sent per
// successful update, or -1 when the requests were not counted or nothing
// succeeded.
func (s Summary) RequestsPerUpdate() float64 {
	if s.Requests < 0 || s.Succeeded == 0 {
		return -1
	}
	return float64(s.Requests) / float64(s.Succeeded)
}

// Summarize computes r's Summary.
func Summarize(r Result) Summary {
	s := Summary{Strategy: r.Strategy, Writers: r.Writers, Updates: len(r.Calls), Wall: r.Wall, Final: r.Final, Requests: -1}
	if r.Requests != nil {
		s.Requests = r.Requests.Resource("configmaps")
	}
	lat := make([]time.Duration, 0, len(r.Calls))
	for _, c := range r.Calls {
		s.Attempts += c.Attempts
		s.Conflicts += c.Conflicts
		s.MaxAttempts = max(s.MaxAttempts, c.Attempts)
		s.Gets += c.Gets
		if c.CurrentModified {
			s.CurrentModified++
		}
		if c.Err == nil {
			s.Succeeded++
		} else {
			s.GaveUp++
			if !apierrors.IsConflict(c.Err) {
				s.GaveUpNonConflict++
			}
		}
		lat = append(lat, c.Latency)
	}
	slices.Sort(lat)
	s.P50 = Percentile(lat, 50)
	s.P99 = Percentile(lat, 99)
	return s
}

// FirstNonConflict returns the first give-up error that is not a Conflict,
// or nil.
func FirstNonConflict(r Result) error {
	for _, c := range r.Calls {
		if c.Err != nil && !apierrors.IsConflict(c.Err) {
			return c.Err
		}
	}
	return nil
}

// Problems lists the ways a run broke the workload's promises, each
// prefixed with label: a counter that differs from the increments that
// returned nil (an update lost or doubled), a give-up on something other
// than a Conflict, a call over s.Steps attempts, a current modified.
func Problems(label string, s Strategy, res Result) []string {
	sum := Summarize(res)
	var problems []string
	if sum.Final != sum.Succeeded {
		problems = append(problems, fmt.Sprintf("%s: counter %d but %d increments succeeded", label, sum.Final, sum.Succeeded))
	}
	if err := FirstNonConflict(res); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %d gave up on something other than a Conflict, e.g. %v", label, sum.GaveUpNonConflict, err))
	}
	if sum.MaxAttempts > s.Steps {
		problems = append(problems, fmt.Sprintf("%s: a call made %d attempts, more than Steps %d", label, sum.MaxAttempts, s.Steps))
	}
	if sum.CurrentModified > 0 {
		problems = append(problems, fmt.Sprintf("%s: %d calls modified the object they started from", label, sum.CurrentModified))
	}
	return problems
}

// SuccessRate is the fraction of calls that returned nil, 0 when none
// was made.
func (s Summary) SuccessRate() float64 {
	if s.Updates == 0 {
		return 0
	}
	return float64(s.Succeeded) / float64(s.Updates)
}

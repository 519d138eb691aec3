package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
)

// The forms every strategy runs in: through retry.Update (a stored
// object's first attempt is one PUT; a Conflict reads afresh), and
// client-go's documented idiom (a GET, the change and a PUT inside a
// conflict-retrying loop).
const (
	formUpdate = "Update"
	formIdiom  = "GET-change-PUT"
)

var forms = []string{formUpdate, formIdiom}

// AWS's "Exponential Backoff And Jitter" (and its simulator,
// aws-samples/aws-arch-backoff-simulator): base and cap of the three
// jittered schedules, which keep attempting at the cap.
const (
	awsBase  = 5 * time.Millisecond
	awsCap   = time.Second
	awsSteps = 30
)

// readmeBackoff is the x1.2 exponential, the README's recommendation for a
// hot object before the study measured anything.
var readmeBackoff = retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0, Cap: 2 * time.Second}

// Strategy names, shared by the plots, the targets and the tests.
const (
	nameClientGoRetry   = "client-go DefaultRetry"
	nameClientGoBackoff = "client-go DefaultBackoff"
	nameFullJitter      = "AWS full jitter"
	nameEqualJitter     = "AWS equal jitter"
	nameDecorrelated    = "AWS decorrelated jitter"
	nameCenkalti        = "cenkalti/backoff defaults"
	nameX12             = "x1.2 exponential"
	nameHot             = "HotObjectBackoff"
	nameHotContention   = "HotObjectBackoff + Contention"
)

// names are the strategies in the plots' order; peers are those a user
// would otherwise pick, against which HotObjectBackoff is held.
var (
	names = []string{nameClientGoRetry, nameClientGoBackoff, nameFullJitter, nameEqualJitter,
		nameDecorrelated, nameCenkalti, nameX12, nameHot, nameHotContention}
	peers = names[:7]
)

// fullName is a strategy's name in one form, as the CSV and the table
// give it.
func fullName(name, form string) string { return name + " / " + form }

// writerRand is writer w's own source of jitter, seeded apart from every
// other writer's.
func writerRand(w int) func() float64 {
	return rand.New(rand.NewPCG(rand.Uint64(), uint64(w))).Float64
}

// policy is one strategy's schedule for one writer: the backoff and the
// options of each of its calls (new ones each call, for a schedule that
// keeps state within a call), on the writer's own random source.
type policy struct {
	b    retry.Backoff
	opts func() []retry.Option
}

// schedules returns writer w's policy of strategy name; the client-go and
// cenkalti ones in the idiom form use their own loops instead (idiom).
func schedule(name string, w int) policy {
	rnd := writerRand(w)
	fixed := func(b retry.Backoff, more ...retry.Option) policy {
		opts := append([]retry.Option{retry.WithRand(rnd)}, more...)
		return policy{b: b, opts: func() []retry.Option { return opts }}
	}
	switch name {
	case nameClientGoRetry:
		return fixed(retry.DefaultRetry)
	case nameClientGoBackoff:
		return fixed(retry.DefaultBackoff)
	case nameFullJitter:
		return fixed(retry.Backoff{Steps: awsSteps, Duration: awsBase, Factor: 2, Cap: awsCap},
			retry.WithContinueAtCap(), retry.WithFullJitter())
	case nameEqualJitter:
		// min(cap, base*2^n)/2 + rand*min(cap, base*2^n)/2: half the
		// schedule, Jitter 1.0 adding up to as much again.
		return fixed(retry.Backoff{Steps: awsSteps, Duration: awsBase / 2, Factor: 2, Jitter: 1, Cap: awsCap / 2},
			retry.WithContinueAtCap())
	case nameDecorrelated:
		// Each wait min(cap, rand(base, 3*previous)): a schedule of its
		// own, which the loop's sleeper keeps.
		return policy{b: retry.Backoff{Steps: awsSteps}, opts: func() []retry.Option {
			return []retry.Option{retry.WithSleeper(&decorrelated{prev: awsBase, rnd: rnd})}
		}}
	case nameCenkalti:
		// backoff.NewExponentialBackOff's schedule (500ms, x1.5, 0.5
		// randomization, 60s interval cap), its retries bounded by its
		// 15-minute elapsed time, not by a count.
		return policy{b: retry.Backoff{Steps: cenkaltiSteps}, opts: func() []retry.Option {
			return []retry.Option{retry.WithSleeper(cenkaltiSleeper{cenkalti.NewExponentialBackOff()})}
		}}
	case nameX12:
		return fixed(readmeBackoff)
	case nameHot:
		return fixed(retry.HotObjectBackoff)
	case nameHotContention:
		// The writer's own Contention, as a process keeps one.
		return fixed(retry.HotObjectBackoff, retry.WithContention(retry.NewContention()))
	}
	panic("unknown strategy " + name)
}

// cenkaltiSteps bounds the attempts of the cenkalti strategy, which has
// no count of its own: more than its 15 minutes allow at 500ms and up.
const cenkaltiSteps = 1000

// steps returns the most attempts one call of strategy name may make.
func steps(name string) int {
	switch name {
	case nameCenkalti:
		return cenkaltiSteps
	case nameClientGoRetry:
		return cgretry.DefaultRetry.Steps
	case nameClientGoBackoff:
		return cgretry.DefaultBackoff.Steps
	}
	return schedule(name, 0).b.Steps
}

// strategy returns strategy name in form, each writer with its own
// policy.
func strategy(name, form string) contention.Strategy {
	s := contention.Strategy{Name: fullName(name, form), Steps: steps(name)}
	switch {
	case form == formUpdate:
		s.ForWriter = func(w int) contention.Strategy {
			p := schedule(name, w)
			return contention.Strategy{Update: contention.Typed(p.b, p.opts)}
		}
	case name == nameClientGoRetry:
		s.Loop = clientGo(cgretry.DefaultRetry)
	case name == nameClientGoBackoff:
		s.Loop = clientGo(cgretry.DefaultBackoff)
	case name == nameCenkalti:
		s.Loop = cenkaltiLoop
	default:
		s.ForWriter = func(w int) contention.Strategy {
			p := schedule(name, w)
			return contention.Strategy{Loop: func(ctx context.Context, fn func(context.Context) error) error {
				return retry.RetryOnConflictWithContext(ctx, p.b, fn, p.opts()...)
			}}
		}
	}
	return s
}

// strategies returns every strategy of names in every form of fs.
func strategies(ns, fs []string) []contention.Strategy {
	var ss []contention.Strategy
	for _, f := range fs {
		for _, n := range ns {
			ss = append(ss, strategy(n, f))
		}
	}
	return ss
}

// clientGo is client-go's own RetryOnConflict with backoff b.
func clientGo(b wait.Backoff) contention.Loop {
	return func(ctx context.Context, fn func(context.Context) error) error {
		return cgretry.RetryOnConflict(b, func() error { return fn(ctx) })
	}
}

// cenkaltiLoop is cenkalti/backoff's own Retry with its defaults, a
// Conflict retried and any other error permanent.
func cenkaltiLoop(ctx context.Context, fn func(context.Context) error) error {
	_, err := cenkalti.Retry(ctx, func() (struct{}, error) {
		err := fn(ctx)
		if err != nil && !apierrors.IsConflict(err) {
			return struct{}{}, cenkalti.Permanent(err)
		}
		return struct{}{}, err
	}, cenkalti.WithMaxTries(cenkaltiSteps))
	var perm *cenkalti.PermanentError
	if errors.As(err, &perm) {
		return perm.Unwrap()
	}
	return err
}

// decorrelated sleeps AWS's decorrelated jitter, whatever wait the loop
// asks for: min(cap, rand(base, 3*previous)), the first from base.
type decorrelated struct {
	prev time.Duration
	rnd  func() float64
}

func (d *decorrelated) Sleep(time.Duration) {
	hi := 3 * d.prev
	d.prev = min(awsCap, awsBase+time.Duration(d.rnd()*float64(hi-awsBase)))
	time.Sleep(d.prev)
}

// cenkaltiSleeper sleeps cenkalti/backoff's next wait, whatever wait the
// loop asks for.
type cenkaltiSleeper struct{ b *cenkalti.ExponentialBackOff }

func (s cenkaltiSleeper) Sleep(time.Duration) { time.Sleep(s.b.NextBackOff()) }

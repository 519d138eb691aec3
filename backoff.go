package retry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// ErrInvalidBackoff is wrapped by the error that [Backoff.Validate] returns,
// and so by the error of every loop given an invalid [Backoff]. Match it with
// [errors.Is].
var ErrInvalidBackoff = errors.New("retry: invalid backoff")

const maxDuration = time.Duration(math.MaxInt64)

// Backoff holds the parameters of a retry loop's waits. It has the same field
// names, types and order as k8s.io/apimachinery/pkg/util/wait.Backoff, so
// retry.Backoff(w) and wait.Backoff(b) convert either way.
//
// The zero Backoff is invalid for the loops (Steps is 0): they return an error
// wrapping [ErrInvalidBackoff] instead of silently never calling fn, as
// client-go does. A Backoff is a plain value; the loops take a copy, so one
// value may be shared by any number of goroutines. [Backoff.Step] mutates its
// receiver and is not safe for concurrent use on one value.
type Backoff struct {
	// Duration is the first wait. Later waits are Duration times Factor,
	// repeatedly, until Steps or Cap stop the growth.
	Duration time.Duration
	// Factor multiplies Duration after each step; 0 keeps Duration as it is.
	Factor float64
	// Jitter adds up to Jitter*Duration, chosen at random, to each wait.
	// It never feeds back into Duration.
	Jitter float64
	// Steps is the largest number of attempts a loop makes, and the number of
	// steps in which Duration may still grow.
	Steps int
	// Cap, when positive, bounds Duration: the step whose growth would pass
	// Cap sets Duration to Cap and Steps to 0, which ends a loop after that
	// wait (see [WithContinueAtCap]).
	Cap time.Duration
}

// Step returns the next wait and advances b, exactly as
// wait.Backoff.Step does: a nil b returns 0; with Steps below 1 the wait
// is Duration (jittered) and Steps becomes 0; otherwise Steps decreases by
// one and Duration becomes Duration*Factor (kept when Factor is 0), or Cap
// with Steps set to 0 when that would pass a positive Cap. The returned wait
// is the Duration before the step, plus jitter.
//
// Where apimachinery's arithmetic overflows, Step saturates at the largest
// time.Duration instead (before Cap applies), and it never returns a negative
// wait: a negative result, possible only for a Backoff that
// [Backoff.Validate] rejects, is returned as 0. The jitter comes from
// math/rand/v2's global source. Step is not safe for concurrent use on one
// Backoff.
func (b *Backoff) Step() time.Duration {
	if b == nil {
		return 0
	}
	return b.step(nil)
}

// step is Step with the random source for jitter passed in: rnd's values
// are clamped into [0,1), and nil means math/rand/v2's global source.
func (b *Backoff) step(rnd func() float64) time.Duration {
	d := b.Duration
	if b.Steps < 1 {
		b.Steps = 0
	} else {
		b.Steps--
		if b.Factor != 0 {
			next := scale(d, b.Factor)
			if b.Cap > 0 && next > b.Cap {
				next = b.Cap
				b.Steps = 0
			}
			b.Duration = next
		}
	}
	if b.Jitter > 0 {
		d = jitter(d, b.Jitter, draw(rnd))
	}
	return max(d, 0)
}

// below1 is the largest float64 below 1.
var below1 = math.Nextafter(1, 0)

// draw returns a value in [0,1) from rnd, clamped into it, or from
// math/rand/v2's global source when rnd is nil (the default of WithRand).
func draw(rnd func() float64) float64 {
	if rnd == nil {
		return rand.Float64()
	}
	return unitInterval(rnd())
}

// unitInterval clamps r into [0,1); NaN becomes 0.
func unitInterval(r float64) float64 {
	switch {
	case !(r >= 0): // negative or NaN
		return 0
	case r >= 1:
		return below1
	}
	return r
}

// Validate reports whether the loops can use b. It returns nil, or an error
// wrapping [ErrInvalidBackoff] that names each invalid field and its value.
// Invalid are: Steps below 1; a negative Duration or Cap; a negative, NaN or
// infinite Factor or Jitter.
func (b Backoff) Validate() error {
	if b.valid() {
		return nil
	}
	return b.invalid()
}

// valid is Validate's test, small enough to inline: every loop call runs it.
func (b *Backoff) valid() bool {
	return b.Steps >= 1 && b.Duration >= 0 && b.Cap >= 0 && finiteNonNegative(b.Factor) && finiteNonNegative(b.Jitter)
}

// invalid builds Validate's error, naming every invalid field.
func (b Backoff) invalid() error {
	var bad []string
	if b.Duration < 0 {
		bad = append(bad, fmt.Sprintf("Duration %v is negative", b.Duration))
	}
	if !finiteNonNegative(b.Factor) {
		bad = append(bad, fmt.Sprintf("Factor %v is not a finite non-negative number", b.Factor))
	}
	if !finiteNonNegative(b.Jitter) {
		bad = append(bad, fmt.Sprintf("Jitter %v is not a finite non-negative number", b.Jitter))
	}
	if b.Steps < 1 {
		bad = append(bad, fmt.Sprintf("Steps %d is below 1, so nothing would be attempted", b.Steps))
	}
	if b.Cap < 0 {
		bad = append(bad, fmt.Sprintf("Cap %v is negative", b.Cap))
	}
	return fmt.Errorf("%w: %s", ErrInvalidBackoff, strings.Join(bad, "; "))
}

// finiteNonNegative reports whether f is in [0, MaxFloat64]; NaN is not.
func finiteNonNegative(f float64) bool {
	return f >= 0 && f <= math.MaxFloat64
}

// WithMaxRetries returns a copy of b that allows n retries after the first
// attempt: Steps is n+1. A negative n counts as 0, and math.MaxInt gives
// Steps math.MaxInt instead of wrapping around.
func (b Backoff) WithMaxRetries(n int) Backoff {
	n = max(n, 0)
	if n == math.MaxInt {
		b.Steps = n
	} else {
		b.Steps = n + 1
	}
	return b
}

// Jitter returns d plus a random amount up to maxFactor*d, as
// wait.Jitter does; a maxFactor of 0 or below (or NaN) means 1.0. Where
// apimachinery would overflow, the result saturates at the largest
// time.Duration. It is safe for concurrent use.
func Jitter(d time.Duration, maxFactor float64) time.Duration {
	if !(maxFactor > 0) {
		maxFactor = 1.0
	}
	return jitter(d, maxFactor, rand.Float64())
}

// jitter returns d plus r*maxFactor*d, with r in [0,1).
func jitter(d time.Duration, maxFactor, r float64) time.Duration {
	// Same operand order as apimachinery, so the float result is bit-identical.
	return addSat(d, scaleFloat(r*maxFactor*float64(d)))
}

// scale returns d*f, saturating where the product does not fit.
func scale(d time.Duration, f float64) time.Duration {
	return scaleFloat(float64(d) * f)
}

// scaleFloat converts x to a Duration, saturating where it does not fit;
// NaN (0 times an infinity) is 0. Go's own conversion is
// implementation-defined out of range, and on amd64 gives a negative value.
func scaleFloat(x float64) time.Duration {
	const limit = 1 << 63         // float64(math.MaxInt64) rounds up to this
	if -limit <= x && x < limit { // false for NaN too
		return time.Duration(x)
	}
	return saturate(x)
}

// saturate is scaleFloat's out-of-range case, apart so that scaleFloat
// stays small enough to inline on the hot path.
func saturate(x float64) time.Duration {
	switch {
	case math.IsNaN(x):
		return 0
	case x > 0:
		return maxDuration
	}
	return math.MinInt64
}

// addSat returns a+b, saturating instead of wrapping around.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return maxDuration
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

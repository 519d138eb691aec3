package retry

import (
	"sync"
	"time"

	"github.com/kuberetry/retry/internal/objrules"
)

// Contention learns, from the attempts of the loops given it through
// [WithContention], how long a retry on a contended object should wait,
// so that one [HotObjectBackoff] serves 2 writers and 128 alike. A retried
// attempt that meets a Conflict (or an AlreadyExists) raises the wait it
// learned to 1.5 times the wait before it; an attempt that succeeds lowers
// it by a quarter. It settles where about 4 attempts in 10 meet a
// Conflict: conflicts per attempt are the signal every writer sees of how
// many others there are. Each wait of a loop given it is based on the
// longer of its Backoff's and the one learned (never above Cap, or 2s
// without one), jittered as ever; Steps still bounds the attempts.
//
// It learns only from the calls given it, and keeps one estimate whatever
// the number of objects (a few words of memory): give each hot object, or
// each group of objects contended alike, its own, and keep it for the
// life of the process. The zero Contention and NewContention's are ready
// to use, having learned nothing. A *Contention is safe for concurrent
// use; learning takes a lock and allocates nothing. The measurements
// behind it: docs/contention.md.
type Contention struct {
	mu    sync.Mutex
	level time.Duration // the first wait learned; 0 when nothing is
}

// NewContention returns a [Contention] that has learned nothing yet: the
// first loop given it waits as its Backoff says.
func NewContention() *Contention {
	return &Contention{}
}

// The rule of a Contention's learning: a retried attempt's Conflict
// multiplies the level by contentionUp, a success by contentionDown, so
// the level settles where the fraction p of attempts that meet a Conflict
// satisfies p*ln(up) = (1-p)*ln(1/down), p = 0.42 (docs/contention.md).
// contentionCeiling bounds the level of a Backoff without a Cap.
const (
	contentionUp      = 1.5
	contentionDown    = 0.75
	contentionCeiling = 2 * time.Second
)

// wait returns the base of a loop's next wait, before its jitter: the
// base its Backoff b has reached, or the level c has learned when that is
// longer (bounded by given, the Backoff as the loop was given it; see
// bounds).
func (c *Contention) wait(given *Backoff, base time.Duration) time.Duration {
	if c == nil {
		return base
	}
	c.mu.Lock()
	level := c.level
	c.mu.Unlock()
	lo, hi := bounds(given)
	return max(base, min(max(level, lo), hi))
}

// bounds returns the range of the level for a Backoff b: from its
// Duration to its Cap, or contentionCeiling without one (never below
// Duration).
func bounds(b *Backoff) (lo, hi time.Duration) {
	hi = contentionCeiling
	if b.Cap > 0 {
		hi = b.Cap
	}
	return b.Duration, max(hi, b.Duration)
}

// learn learns from one attempt of a loop given the Backoff given:
// waited is the base of the wait before it (0 for a first attempt). A
// Conflict after a wait that the loop retries (again) raises the level to
// contentionUp times that base or the level, whichever is longer; any
// success lowers it. A first attempt's Conflict teaches nothing: the
// object it wrote may have been stale however long the loop had waited.
func (c *Contention) learn(given *Backoff, waited time.Duration, err error, again bool) {
	if c == nil {
		return
	}
	up := false
	switch {
	case err == nil:
	case waited > 0 && again && objrules.RetriableCreate(err):
		up = true
	default:
		return
	}
	lo, hi := bounds(given)
	c.mu.Lock()
	level := max(c.level, lo)
	if up {
		level = scale(max(level, waited), contentionUp)
	} else {
		level = scale(level, contentionDown)
	}
	c.level = min(max(level, lo), hi)
	c.mu.Unlock()
}

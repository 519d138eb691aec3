package retry

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// windowSlots is the number of sub-windows a Window is counted in.
const windowSlots = 10

// retryWindow is a Budget's retry budget: the first attempts and retries
// of the last Window, counted in sub-windows so that memory does not grow
// with the request rate, and the counters of what it granted. Its lock
// guards every field.
type retryWindow struct {
	mu         sync.Mutex
	started    bool
	base       time.Time // the first reading; sub-windows are counted from it
	latest     time.Time // the latest reading
	cur        uint64    // the sub-window of the latest reading
	firsts     [windowSlots + 1]int64
	retries    [windowSlots + 1]int64
	firstTotal int64 // first attempts in the newest windowSlots sub-windows
	retryTotal int64 // retries in all windowSlots+1 sub-windows

	deposited, granted, refused uint64 // since the first use
}

// windowLimits is what a Budget's fields say to its window.
type windowLimits struct {
	window       time.Duration
	ratio, floor float64 // floor: MinPerSecond * Window in seconds
}

// deposit counts one first attempt at now.
func (w *retryWindow) deposit(now time.Time, l windowLimits) {
	w.mu.Lock()
	slot := w.advance(now, l.window)
	w.firsts[slot]++
	w.firstTotal++
	w.deposited++
	w.mu.Unlock()
}

// withdraw counts one retry at now and reports true, or reports false,
// counting nothing but the refusal, when the retry would exceed
// floor(l.floor + l.ratio*first attempts).
func (w *retryWindow) withdraw(now time.Time, l windowLimits) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	slot := w.advance(now, l.window)
	if float64(w.retryTotal+1) > math.Floor(l.floor+l.ratio*float64(w.firstTotal)) {
		w.refused++
		return false
	}
	w.retries[slot]++
	w.retryTotal++
	w.granted++
	return true
}

// counts returns the first attempts deposited, the retries granted and
// those refused, since the first use.
func (w *retryWindow) counts() (deposited, granted, refused uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deposited, w.granted, w.refused
}

// advance moves the current sub-window forward to now, dropping what no
// longer counts, and returns the current sub-window's slot. Sub-window k
// spans [k, k+1) * window/windowSlots from the first reading. A first
// attempt counts while it is in one of the newest windowSlots sub-windows
// (so it stops counting within window/windowSlots before its time is up),
// a retry while it is in one of the newest windowSlots+1 (so it stops
// within window/windowSlots after). A reading earlier than the latest
// counts as the latest.
func (w *retryWindow) advance(now time.Time, window time.Duration) int {
	if !w.started {
		w.started, w.base, w.latest = true, now, now
	}
	var k uint64
	if elapsed := now.Sub(w.base); elapsed > 0 {
		// floor(elapsed*windowSlots/window) without overflow.
		hi, lo := bits.Mul64(uint64(elapsed), windowSlots)
		if elapsed == maxDuration || hi >= uint64(window) {
			// now.Sub saturated (now is over 292 years after base), or the
			// quotient does not fit in 64 bits (a window of a few ns, now
			// decades after base): number the sub-windows afresh from now.
			w.restart(now, window)
			return 0
		}
		k, _ = bits.Div64(hi, lo, uint64(window))
	}
	if now.After(w.latest) {
		w.latest = now
	}
	const n = windowSlots + 1
	switch {
	case k <= w.cur: // the same sub-window, or a clock that went back
	case k-w.cur >= n:
		w.firsts, w.retries = [n]int64{}, [n]int64{}
		w.firstTotal, w.retryTotal = 0, 0
		w.cur = k
	default:
		for w.cur < k {
			w.cur++
			// Sub-window cur-windowSlots leaves the first attempts' count;
			// cur takes the slot of cur-n, which leaves the retries'.
			w.firstTotal -= w.firsts[(w.cur+1)%n]
			slot := w.cur % n
			w.retryTotal -= w.retries[slot]
			w.firsts[slot], w.retries[slot] = 0, 0
		}
	}
	return int(w.cur % n)
}

// restart makes now the start of sub-window 0, for a now too far from
// base to number its sub-window. First attempts are dropped, which only
// lowers what is granted. Retries are dropped when the latest reading is
// at least 1.1 windows before now, so that none still counts; otherwise
// they are kept in now's sub-window, which counts them late, never early.
func (w *retryWindow) restart(now time.Time, window time.Duration) {
	keep := w.retryTotal
	// gap >= window + ceil(window/10), written so that nothing overflows.
	if gap := now.Sub(w.latest); gap >= window && gap-window > (window-1)/windowSlots {
		keep = 0
	}
	const n = windowSlots + 1
	w.firsts, w.retries = [n]int64{}, [n]int64{}
	w.firstTotal, w.retryTotal = 0, keep
	w.retries[0] = keep
	w.base, w.latest, w.cur = now, now, 0
}

package retry

import "time"

// DoneEvent describes a loop that returned; see [WithOnDone].
type DoneEvent struct {
	// Attempts is the number of attempts made: calls of fn, or of the
	// read-change-write of a write loop ([UpdateOnConflict],
	// [CreateOrUpdate], [PatchOnConflict] and their typed forms). It is 0
	// when a context was done before the first attempt, and when a
	// [Budget]'s hold refused the first attempt or held it until the
	// context ended.
	Attempts int
	// Err is the error the loop returns, nil on success.
	Err error
	// Exhausted is true when the loop returned because no attempt was left:
	// Steps attempts were made, or the step that reached [Backoff].Cap was
	// waited out. It is false when fn succeeded, when the predicate rejected
	// an error, and when a context or a [Budget] ended the loop.
	Exhausted bool
}

// RetryEvent describes a failed attempt and the wait before the next one; see
// [WithOnRetry].
type RetryEvent struct {
	// Attempt is the 1-based number of the attempt that just failed.
	Attempt int
	// Err is the error that attempt returned.
	Err error
	// Delay is the wait about to be slept, after jitter, Retry-After and
	// [WithMaxDelay].
	Delay time.Duration
	// RetryAfter is the delay the server suggested, 0 if none or negative
	// (only a loop with a server-delay source reads it: [OnRetryAfterError],
	// or any loop given [WithRetryAfter]).
	RetryAfter time.Duration
	// Final is true for the wait after the step that reached [Backoff].Cap:
	// the loop returns when it ends, with no further attempt. It is never
	// true under [WithContinueAtCap].
	Final bool
}

// done reports the loop's end to the WithOnDone hook and returns err.
func (o *options) done(attempts int, err error, exhausted bool) error {
	if o.onDone != nil {
		o.onDone(DoneEvent{Attempts: attempts, Err: err, Exhausted: exhausted})
	}
	return err
}

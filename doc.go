// Package retry retries Kubernetes API writes: an update that meets a 409
// Conflict, or a request the server throttles with 429 and Retry-After. It
// mirrors k8s.io/client-go/util/retry, with the same retry counts, waits and
// returned errors, and adds what that package lacks: contexts, a sleeper that
// tests can fake, Retry-After, and loud errors for a bad configuration.
//
// # Which loop
//
//   - [RetryOnConflict] wraps a read-modify-update closure and retries it on
//     a Conflict. The closure must get the object afresh on every call.
//   - [OnError] retries on any error its predicate accepts.
//   - [OnRetryAfterError] also waits as long as the server asks: each wait is
//     the longer of the backoff's and the error's [RetryAfter]. Use it with
//     [IsRetryAfterError] and [DefaultRetryAfterBackoff].
//   - [OnErrorWithContext], [RetryOnConflictWithContext] and
//     [OnRetryAfterErrorWithContext] run under a context, which they pass to
//     fn.
//
// # When a loop stops, and what it returns
//
// A loop calls fn at most [Backoff].Steps times, waiting [Backoff.Step]
// between calls. It returns nil as soon as fn does, and fn's error as it is
// when the predicate rejects it. When the attempts run out it returns the last
// error itself, not wrapped, so apierrors.IsConflict(err) and err == lastErr
// both hold. When a step reaches [Backoff].Cap the loop ends after that wait,
// as apimachinery's wait.ExponentialBackoff does; [WithContinueAtCap] keeps
// it going at the Cap. A context variant ended by its context returns an
// error that matches the context's error with [errors.Is] and also wraps the
// last attempt's error.
//
// # Time
//
// The default sleeper waits in real time and, in the context variants,
// returns early when the context is done. A [Sleeper] given with
// [WithSleeper] is called instead, once per wait, a zero wait included. A test passes a fake one with [WithSleeper], such as
// k8s.io/utils/clock/testing.FakeClock, and a fixed jitter source with
// [WithRand], so nothing sleeps and every wait is known:
//
//	clk := testingclock.NewFakeClock(time.Now())
//	err := retry.RetryOnConflict(retry.DefaultBackoff, update, retry.WithSleeper(clk))
//
// [WithMaxDelay] bounds every wait, whatever the backoff or the server says,
// and [WithOnRetry] reports each wait before it starts, for logs and metrics.
//
// # Moving from client-go
//
// Change the import path; a wait.Backoff value v becomes retry.Backoff(v).
// Where client-go's behaviour is relied on, it is kept. These differ on
// purpose:
//
//   - An invalid [Backoff] (Steps below 1, a negative or non-finite field), a
//     nil fn or a nil predicate returns an error at once; client-go silently
//     never calls fn on a zero Backoff and returns "timed out waiting for the
//     condition".
//   - A non-retriable error is returned as it is; client-go's OnError swaps
//     one that wait.Interrupted matches (context.Canceled or
//     context.DeadlineExceeded, wrapped too) for the previous retriable error
//     (kubernetes/kubernetes#140402).
//   - Where apimachinery's arithmetic overflows, [Backoff.Step] saturates at
//     the largest time.Duration and never returns a negative wait.
//   - [ParseRetryAfter] takes digits only and HTTP-dates; client-go's
//     strconv.Atoi takes "+5" and "-1" and no dates.
//
// The loops and the package's functions and variables are safe for
// concurrent use ([Backoff.Step] changes its receiver, so one Backoff value
// must not be stepped from two goroutines); a loop starts no goroutine, and
// its success path does not allocate.
package retry

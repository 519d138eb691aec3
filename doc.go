// Package retry retries Kubernetes API writes: an update that meets a 409
// Conflict, a request the server throttles with 429 and Retry-After, a call
// that fails while the apiserver restarts. Its typed forms make a whole
// write in one call: read, change, write, with the races retried. Under
// them, it mirrors k8s.io/client-go/util/retry, with the same retry
// counts, waits and returned errors, and adds what that package lacks:
// contexts, a sleeper that tests can fake, Retry-After, and loud errors
// for a bad configuration.
//
// # Which loop
//
// For a client-go typed client (cms := client.CoreV1().ConfigMaps(ns)),
// one call takes the client, the object and a mutate function that
// changes it:
//
//   - [Ensure] makes sure an object exists and looks as mutate wants it,
//     the write of every reconciler: it reads the object, creates it when
//     it is missing and updates it otherwise, and retries the races that
//     controller-runtime's controllerutil.CreateOrUpdate returns to its
//     caller (AlreadyExists from another writer's create, a Conflict, a
//     NotFound from a delete in between, and the Conflict an HA control
//     plane's quota admission gives a create). Its [Result] says what it
//     did.
//   - [Update] changes an object that exists and writes it, and on a
//     Conflict reads it afresh and changes it again; [UpdateStatus] does
//     the same through the status subresource.
//   - [Patch] sends what mutate changed as a JSON merge patch locked to the
//     version read, so fields that the client's Go type does not know are
//     kept.
//
// Each skips a write that changes nothing (numbers of an unstructured
// object compared by value), never modifies the object it is given nor one
// it read, and returns the object as the server stored it. Only an object
// that carries a resourceVersion (from an informer's lister, or the object
// a previous write returned) is changed without a read; one the caller
// built is read first, so it is never written blind over the stored one.
//
// For any other client (the dynamic client, controller-runtime's, your
// own) the same loops take closures for the read and the writes:
// [CreateOrUpdate] is Ensure's loop, [UpdateOnConflict] Update's and
// [PatchOnConflict] Patch's. For controller-runtime, the module
// github.com/kuberetry/retry/ctrlretry is controllerutil.CreateOrUpdate and
// CreateOrPatch with the races retried.
//
// Around a call of your own:
//
//   - [RetryOnConflict] and [RetryOnConflictWithContext] retry a closure on
//     a Conflict, as client-go's do; the closure must get the object afresh
//     on every call. A Server-Side Apply conflict ([IsApplyConflict]) is
//     returned at once: the same apply can never succeed.
//   - [OnError] and [OnErrorWithContext] retry on any error a predicate
//     accepts; [OnErrorValue] does the same for a call that returns a value.
//     [IsTransient] is the predicate for a call that may meet a restarting
//     or overloaded apiserver.
//   - [OnRetryAfterError] and [OnRetryAfterErrorWithContext] also wait as
//     long as the server asks: each wait is the longer of the backoff's and
//     the error's [RetryAfter]. [WithRetryAfter] gives any loop a source of
//     server delays, such as [ResponseRetryAfter] for a plain HTTP call.
//
// A call through a client-go clientset already retries a 429 or 5xx that
// carries a Retry-After, up to 10 times (rest.Request's default
// MaxRetries). Wrapping it in OnRetryAfterError multiplies the requests: up
// to 11 per attempt, 121 with [DefaultRetryAfterBackoff]. Use
// OnRetryAfterError for a RESTClient request with MaxRetries(0), a plain
// HTTP call, or when you want your own bound on the whole operation.
//
// # When a loop stops, and what it returns
//
// A loop calls fn at most [Backoff].Steps times, waiting [Backoff.Step]
// between calls. It returns nil as soon as fn does, and fn's error as it is
// when the predicate rejects it. When the attempts run out it returns the last
// error itself, not wrapped, so apierrors.IsConflict(err) and err == lastErr
// both hold. When a step reaches [Backoff].Cap the loop ends after that wait,
// as apimachinery's wait.ExponentialBackoff does; [WithContinueAtCap] keeps
// it going at the Cap. A loop ended by its context returns an error that
// matches the context's error, its cause (context.Cause) and the last
// attempt's error with [errors.Is]. A loop refused a retry by its [Budget]
// returns at once an error that matches [ErrBudgetExhausted] and the last
// attempt's error.
//
// # Transient failures
//
// A connection refused or reset, a timeout, a 5xx or a 429 may pass on its
// own ([IsTransient]). But a transport error after the request was sent
// leaves its outcome unknown: the server may have applied the change, and
// a retried change that builds on what it finds (an increment, an append)
// can then apply twice. Retry only a change that sets the state it wants
// (set a field, add a key), so that a repeat is harmless. With
// [UpdateOnConflict] and such a mutate, a retry reads the object afresh,
// finds its change already made and writes nothing; its resourceVersion
// keeps each write from overwriting a change made since, but it does not
// stop a mutate that builds on what it finds from running twice. To ride
// out an outage, put an outer [OnErrorValue] with IsTransient and a longer
// backoff around an inner UpdateOnConflict (see the example of
// UpdateOnConflict). A server that accepts a request and never answers is
// bounded by [WithAttemptTimeout]: each attempt gets a deadline of its own,
// and one that ran out of its time is retried.
//
// # Many loops, one server
//
// Each loop bounds its own retries, but when the apiserver fails every loop
// of every controller retries at once, and the retries multiply the load on
// a server that is already struggling. A controller gives its rest.Config
// one [NewBudget] (cfg.Wrap(budget.WrapTransport), see
// [Budget.WrapTransport]): every request of the process then counts,
// client-go's own resends included. Its retries stay within Ratio per first
// attempt over the last Window, plus a floor of MinPerSecond, as gRPC's
// retry throttling and Finagle's and Envoy's retry budgets do. And while a
// server, or one resource of it (an aggregated API, the writes a webhook
// fails), fails, new requests to it wait without sending, one probe at a
// time finds out whether it is back, and its retries are refused: the rest
// of the API goes on ([Budget].Hold). Leases (leader election) are never
// refused nor held. A refused or held call returns [ErrBudgetExhausted]; a
// reconciler returns it and lets its workqueue requeue the key. Loops need
// no [WithBudget] then; given one, a loop learns of a refusal before its
// wait. A Budget given only to loops bounds those loops together.
//
// [WithOnRetry] reports each wait and [WithOnDone] each call's end, with its
// attempts, its error and whether it ran out of attempts: together they
// count retries, give-ups and refusals for metrics without a wrapper.
//
// # Time
//
// The default sleeper waits in real time; under a context it returns as
// soon as the context is done, and it does not start a wait that would end
// after the context's deadline. WithSleeper(clock.RealClock{}) means the
// default. A test passes a fake [Sleeper] with [WithSleeper], such as
// k8s.io/utils/clock/testing.FakeClock, which is called once per wait, a
// zero wait included, and a fixed jitter source with [WithRand], so nothing
// sleeps and every wait is known:
//
//	clk := testingclock.NewFakeClock(time.Now())
//	err := retry.RetryOnConflict(retry.DefaultBackoff, update,
//		retry.WithSleeper(clk), retry.WithRand(func() float64 { return 0 }))
//
// [WithMaxDelay] bounds every wait, whatever the backoff or the server says,
// and [WithOnRetry] reports each wait before it starts, for logs and metrics.
// [WithFullJitter] draws each wait uniformly between 0 and the backoff's
// step, which spreads writers that failed together.
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
//   - A non-retriable error is returned as it is. client-go's OnError, when
//     fn returns an error that wait.Interrupted matches (context.Canceled or
//     context.DeadlineExceeded, wrapped too) after a retriable one, returns
//     the older retriable error instead; kubernetes/kubernetes#140402 fixed
//     only the case with no earlier error, which used to return nil.
//   - Where apimachinery's arithmetic overflows, [Backoff.Step] saturates at
//     the largest time.Duration and never returns a negative wait.
//   - [ParseRetryAfter] takes digits only and HTTP-dates; client-go's
//     strconv.Atoi takes "+5" and "-1" and no dates.
//   - [RetryOnConflict] and [RetryOnConflictWithContext] return a Server-Side
//     Apply conflict ([IsApplyConflict]) at once; client-go's RetryOnConflict
//     sends the same losing apply Steps times and then returns it.
//
// # Concurrency
//
// The loops and functions are safe for concurrent use; a loop starts no
// goroutine, and the success path of [OnError], [RetryOnConflict],
// [OnErrorValue] and their context variants does not allocate, with
// [WithOnDone] or a [Budget] not put on the wire too (a context loop given
// a Budget on the wire marks its attempt's context: one allocation). A
// Budget is shared by any number of goroutines. The loops take their
// [Backoff] by value, so [DefaultRetry] and the other variables may be
// passed from any number of goroutines. [Backoff.Step] changes its
// receiver: to step a default yourself, step a copy (b :=
// retry.DefaultBackoff; b.Step()), never the package's variable.
package retry

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
// For a client-go typed client (cms := client.CoreV1().ConfigMaps(ns)), one
// call takes the client, the object and a mutate function that changes it:
// [Ensure] creates the object or updates it (the write of every reconciler,
// its [Result] saying what it did), [Update] and [UpdateStatus] change one
// that exists, and [Patch] sends what mutate changed as a merge patch locked
// to the version read. For any other client the same loops take closures:
// [CreateOrUpdate], [UpdateOnConflict] and [PatchOnConflict]. For
// controller-runtime, the module github.com/kuberetry/retry/ctrlretry is
// controllerutil.CreateOrUpdate and CreateOrPatch with the races retried.
// Every write loop keeps the same rules (which attempt reads, the no-op
// check, what is retried and returned), written once in
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#the-rules-every-write-loop-keeps.
//
// Around a call of your own: [RetryOnConflict] and
// [RetryOnConflictWithContext] retry a closure on a Conflict, as client-go's
// do, but return a Server-Side Apply conflict ([IsApplyConflict]) at once;
// [OnError], [OnErrorWithContext] and [OnErrorValue] retry on any error a
// predicate accepts, such as [IsTransient] for a failing apiserver; and
// [OnRetryAfterError] also waits as long as the server asks ([RetryAfter]).
// A client-go clientset call already retries a 429 or 5xx with Retry-After
// by itself, up to 10 times: see
// https://github.com/kuberetry/retry/blob/main/docs/client-go.md#throttling-who-already-retries-a-429.
//
// # When a loop stops
//
// A loop calls fn at most [Backoff].Steps times. It returns nil as soon as
// fn does, fn's error as it is when the predicate rejects it, and the last
// error itself, not wrapped, when the attempts run out. A loop ended by its
// context returns an error that matches the context's error, its cause and
// the last attempt's error. Every loop, option and stop rule:
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#every-loop-when-it-retries-and-when-it-stops.
//
// # Many loops, one server
//
// A [Budget] bounds the retries of every loop of a process together, and
// while a server or one backend of it fails, holds new calls to it and
// sends one probe at a time; a refused or held call returns
// [ErrBudgetExhausted]. A controller gives its rest.Config one [NewBudget]
// (cfg.Wrap(budget.WrapTransport)). How it works:
// https://github.com/kuberetry/retry/blob/main/docs/budget.md; its metrics
// and log lines, and those of [WithOnRetry] and [WithOnDone]:
// https://github.com/kuberetry/retry/blob/main/docs/metrics.md.
//
// # Time
//
// The default sleeper waits in real time and returns as soon as the context
// is done. A test passes a fake [Sleeper] with [WithSleeper] and a fixed
// jitter source with [WithRand], so nothing sleeps and every wait is known:
//
//	clk := testingclock.NewFakeClock(time.Now()) // k8s.io/utils/clock/testing
//	err := retry.RetryOnConflict(retry.DefaultBackoff, update,
//		retry.WithSleeper(clk), retry.WithRand(func() float64 { return 0 }))
//
// # Moving from client-go
//
// Change the import path; a wait.Backoff value v becomes retry.Backoff(v).
// Where client-go's behaviour is relied on, it is kept; every difference is
// in https://github.com/kuberetry/retry/blob/main/docs/client-go.md.
//
// # Concurrency and allocation
//
// The loops and functions are safe for concurrent use and start no
// goroutine; a Budget is shared by any number of goroutines. The loops take
// their [Backoff] by value, so [DefaultRetry] and the other variables may be
// passed from any number of goroutines, but [Backoff.Step] changes its
// receiver: step a copy, never the package's variable. The success path of
// [OnError], [RetryOnConflict], [OnErrorValue] and their context variants
// does not allocate; what options and a Budget cost:
// https://github.com/kuberetry/retry/blob/main/docs/performance.md#options.
package retry

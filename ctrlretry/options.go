package ctrlretry

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kuberetry/retry"
)

// Option configures one call of [CreateOrUpdate] or [CreateOrPatch].
// Options apply in order, so a later one of the same kind wins, except
// [WithLoopOptions], whose options add up. The zero Option does nothing.
type Option struct {
	apply func(*config)
}

// config is what the options set, for one call.
type config struct {
	backoff  retry.Backoff
	reader   client.Reader // nil: the call's client
	loopOpts []retry.Option
}

func newConfig(opts []Option) config {
	cfg := config{backoff: retry.DefaultRetry}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&cfg)
		}
	}
	return cfg
}

// WithBackoff sets the loop's backoff: at most b.Steps attempts, waiting
// b.Step() between them. The default is [retry.DefaultRetry], 5 attempts
// about 10ms apart, as client-go's retry.DefaultRetry. An invalid b (see
// [retry.Backoff.Validate]) makes the call return its error at once,
// sending nothing.
func WithBackoff(b retry.Backoff) Option {
	return Option{apply: func(c *config) { c.backoff = b }}
}

// WithReader sets the reader of the retries: every attempt after a failed
// one reads the object through r, while the first attempt reads through
// the call's client as controllerutil does. Give the manager's API reader
// (mgr.GetAPIReader()) to read the server itself after a race, instead of
// a cache that may not have caught up yet. nil means the call's client.
func WithReader(r client.Reader) Option {
	return Option{apply: func(c *config) { c.reader = r }}
}

// WithLoopOptions passes opts to the retry loop, after those of any earlier
// WithLoopOptions: [retry.WithSleeper] and [retry.WithRand] for tests,
// [retry.WithBudget], [retry.WithOnRetry], [retry.WithOnDone] and the rest.
// Every rule of [retry.OnErrorWithContext] holds for them.
func WithLoopOptions(opts ...retry.Option) Option {
	return Option{apply: func(c *config) { c.loopOpts = append(c.loopOpts, opts...) }}
}

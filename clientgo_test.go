package retry_test

import (
	"time"

	"github.com/kuberetry/retry"
	"k8s.io/apimachinery/pkg/util/wait"
)

// oracleSafe reports whether apimachinery's Step is well defined for b and
// should give exactly what ours gives: non-negative fields, no jitter (the
// random part differs), and a product Duration*Factor that fits an int64
// (beyond it Go's float-to-int conversion is implementation-defined).
func oracleSafe(b retry.Backoff) bool {
	return b.Duration >= 0 && b.Factor >= 0 && b.Jitter == 0 && b.Steps >= 0 && b.Cap >= 0 &&
		float64(b.Duration)*b.Factor < 1<<63
}

// oracleSteps returns the first n waits of wait.Backoff.Step for b.
func oracleSteps(b retry.Backoff, n int) []time.Duration {
	w := wait.Backoff(b)
	var out []time.Duration
	for range n {
		out = append(out, w.Step())
	}
	return out
}

// clientGoOnError is client-go's retry.OnError: the same loop over
// wait.ExponentialBackoff, kept here as the oracle because the root module
// does not depend on client-go.
func clientGoOnError(b wait.Backoff, retriable func(error) bool, fn func() error) error {
	var last error
	err := wait.ExponentialBackoff(b, func() (bool, error) {
		switch err := fn(); {
		case err == nil:
			return true, nil
		case retriable(err):
			last = err
			return false, nil
		default:
			return false, err
		}
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

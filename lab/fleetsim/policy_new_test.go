//go:build !fleetsim_rev6code

package fleetsim

import (
	"errors"

	"github.com/kuberetry/retry"
)

// rev6Budget is revision 6's schedule, which only its own code has: make
// fleetsim-rev6 runs it there (-tags fleetsim_rev6code).
func rev6Budget() (func() *retry.Budget, error) {
	return nil, errors.New("fleetsim: rev6 runs on revision 6's own code (make fleetsim-rev6); rev6~ approximates it here")
}

// rev6Approx is NewBudget() with every draw near 1: each wait nearly the
// whole interval, as revision 6's, but a 429 still sets the next probe
// about 1.5 x its Retry-After later, which revision 6 ignored.
func rev6Approx() (func() *retry.Budget, error) {
	return func() *retry.Budget {
		b := retry.NewBudget()
		b.Rand = func() float64 { return 0.999999 }
		return b
	}, nil
}

func newBudget() (func() *retry.Budget, error) { return retry.NewBudget, nil }

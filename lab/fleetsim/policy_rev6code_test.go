//go:build fleetsim_rev6code

package fleetsim

import (
	"errors"

	"github.com/kuberetry/retry"
)

// On the library before the jittered schedule, NewBudget() is revision
// 6's schedule itself.
func rev6Budget() (func() *retry.Budget, error) { return retry.NewBudget, nil }

func rev6Approx() (func() *retry.Budget, error) {
	return nil, errors.New("fleetsim: rev6~ needs Budget.Rand: run it without -tags fleetsim_rev6code")
}

func newBudget() (func() *retry.Budget, error) {
	return nil, errors.New("fleetsim: the new schedule needs Budget.Rand: run it without -tags fleetsim_rev6code")
}

package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
)

// exponential is the backoff that the three exponential strategies share,
// as in AWS's study: only the jitter policy differs between them, and with
// it the mean wait (d, 1.5d and d/2 for no jitter, Jitter 1.0 and full
// jitter). They keep attempting at the Cap (WithContinueAtCap): reaching
// it after 8 waits must not end the loop 22 attempts early.
var exponential = retry.Backoff{Steps: 30, Duration: 5 * time.Millisecond, Factor: 2, Cap: time.Second}

// readmeBackoff is the README's recommendation for a hot object before
// this study measured anything.
var readmeBackoff = retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0, Cap: 2 * time.Second}

// Strategy names, shared by the plots and the tests.
const (
	nameClientGoRetry   = "client-go DefaultRetry"
	nameClientGoBackoff = "client-go DefaultBackoff"
	nameExpNoJitter     = "x2 no jitter"
	nameExpJitter       = "x2 Jitter 1.0"
	nameExpFullJitter   = "x2 full jitter"
	nameUpdateFull      = "UpdateOnConflict x2 full jitter"
	nameReadme          = "README x1.2 Jitter 1.0"
	nameHotObject       = "HotObjectBackoff (200ms, x1, Jitter 1.0)"
)

// raisedName names client-go's DefaultBackoff with Steps raised to steps.
func raisedName(steps int) string {
	return fmt.Sprintf("client-go DefaultBackoff, Steps %d", steps)
}

// raisedBackoff is client-go's DefaultBackoff with Steps raised to steps.
func raisedBackoff(steps int) wait.Backoff {
	b := cgretry.DefaultBackoff
	b.Steps = steps
	return b
}

// raised is the strategy of client-go's DefaultBackoff with Steps raised
// to steps, in client-go's own loop.
func raised(steps int) contention.Strategy {
	return contention.ClientGoIdiom(raisedName(steps), raisedBackoff(steps))
}

// strategies returns the strategies the study compares, in the plots'
// order, with client-go's DefaultBackoff raised to raisedSteps. Every
// one but UpdateOnConflict is client-go's documented idiom: a Get, the
// change and an Update inside a conflict-retrying loop.
func strategies(raisedSteps int) []contention.Strategy {
	return []contention.Strategy{
		contention.ClientGoIdiom(nameClientGoRetry, cgretry.DefaultRetry),
		contention.ClientGoIdiom(nameClientGoBackoff, cgretry.DefaultBackoff),
		raised(raisedSteps),
		contention.Idiom(nameReadme, readmeBackoff),
		contention.Idiom(nameExpNoJitter, exponential, retry.WithContinueAtCap()),
		contention.Idiom(nameExpJitter, withJitter(exponential, 1.0), retry.WithContinueAtCap()),
		contention.Idiom(nameExpFullJitter, exponential, retry.WithContinueAtCap(), retry.WithFullJitter()),
		// current is the object the writer's previous update returned
		// (Config.Current nil): fresh, so the first attempt is one PUT.
		contention.Updating(nameUpdateFull, exponential, retry.WithContinueAtCap(), retry.WithFullJitter()),
		// The one the study chose, after the others had been measured.
		contention.Idiom(nameHotObject, retry.HotObjectBackoff),
	}
}

// withJitter returns b with Jitter j.
func withJitter(b retry.Backoff, j float64) retry.Backoff {
	b.Jitter = j
	return b
}

package main

import (
	"fmt"
	"time"
)

// The targets NewBudget() must meet at every queue length limit, in every
// run, against the fleet without a budget of the same run.
const (
	// maxOutageRatio bounds the requests during the outage against no
	// budget's.
	maxOutageRatio = 0.12
	// maxTooManyRatio and minTooManyBound bound the 429s in the
	// afterWindow: max(maxTooManyRatio x no budget's, minTooManyBound).
	maxTooManyRatio = 0.25
	minTooManyBound = 5
	// backWithin bounds when the last worker is back after the outage.
	backWithin = 1500 * time.Millisecond
	// minHealthyShare is the least share of its offered load a fleet
	// sends while healthy: below it the server was saturated, and the run
	// measured the machine rather than the outage.
	minHealthyShare = 0.9
)

// verdicts returns each target the fleets missed, and each harness
// failure (an outage that did not bite, a server saturated before it, a
// write lost under any policy): nothing when every run met them.
func verdicts(fleets []*fleet) []string {
	var missed []string
	for _, f := range fleets {
		name := fmt.Sprintf("queue length %d, run %d, %s", f.queueLength, f.run, f.policy.name)
		for _, p := range f.fig.Problems {
			missed = append(missed, name+": "+p)
		}
		if f.offered > 0 && f.fig.HealthyRate < minHealthyShare*f.offered {
			missed = append(missed, fmt.Sprintf("%s: %.0f requests a second in the healthy phase before the outage, %.3fx the %.0f the fleet offers, want at least %.2fx: the server was saturated (load %s)",
				name, f.fig.HealthyRate, f.fig.HealthyRate/f.offered, f.offered, minHealthyShare, f.load))
		}
		if f.policy.budget == nil {
			if f.fig.OutageRequests == 0 {
				missed = append(missed, name+": no request during the outage: the outage did not bite")
			}
			continue
		}
		if !f.policy.target {
			continue
		}
		none := baselineOf(fleets, f)
		if none == nil {
			missed = append(missed, name+": no run without a budget to compare with")
			continue
		}
		if none.fig.OutageRequests > 0 {
			if r := float64(f.fig.OutageRequests) / float64(none.fig.OutageRequests); r > maxOutageRatio {
				missed = append(missed, fmt.Sprintf("%s: %d requests during the outage, %.3fx the %d without a budget, want at most %.2fx",
					name, f.fig.OutageRequests, r, none.fig.OutageRequests, maxOutageRatio))
			}
		}
		if bound := max(maxTooManyRatio*float64(none.fig.TooManyAfter), minTooManyBound); float64(f.fig.TooManyAfter) > bound {
			missed = append(missed, fmt.Sprintf("%s: %d 429s in the %v after the outage, want at most %.1f (max(%.2fx the %d without a budget, %d))",
				name, f.fig.TooManyAfter, afterWindow, bound, maxTooManyRatio, none.fig.TooManyAfter, minTooManyBound))
		}
		switch {
		case !f.fig.AllBack:
			missed = append(missed, name+": a worker never came back after the outage")
		case f.fig.Back > backWithin:
			missed = append(missed, fmt.Sprintf("%s: the last worker back %v after the outage's end, want within %v",
				name, f.fig.Back.Round(time.Millisecond), backWithin))
		}
	}
	return missed
}

package main

import (
	"time"

	"github.com/kuberetry/retry"
)

// holdsReported tells whether the Budget reports its holds: it does,
// through Budget.OnHold.
const holdsReported = true

// watchHolds records b's holds in log from its OnHold events: a start at
// its Since (the Budget's Clock, real time here), an end when it is
// reported.
func watchHolds(b *retry.Budget, log *holdLog) {
	b.OnHold = func(e retry.HoldEvent) {
		if e.Ended {
			log.ended(e.Scope, time.Now(), e.Probes, e.Waited)
			return
		}
		cause := ""
		if e.Err != nil {
			cause = e.Err.Error()
		}
		log.started(e.Scope, e.Since, cause)
	}
}

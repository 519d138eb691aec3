package ctrlretry

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/kuberetry/retry"
)

// LogHolds returns a function for [retry.Budget].OnHold that logs each
// hold's start and end on log at Info level (logr's V(0)):
//
//	budget.OnHold = ctrlretry.LogHolds(ctrl.Log.WithName("retry"))
//
// A start is the line "retry budget holds requests" with the keys scope
// and error (the failure that started the hold); an end is "retry budget
// released requests" with the keys scope, held (the time since the hold
// started, read when the line is written, on real time), probes and
// waited (the probes sent and the first attempts that waited during the
// hold). The function is safe for concurrent use when log is, as logr's
// sinks are. See docs/metrics.md for the lines an outage produces.
func LogHolds(log logr.Logger) func(retry.HoldEvent) {
	return func(ev retry.HoldEvent) {
		if !ev.Ended {
			log.Info("retry budget holds requests", "scope", ev.Scope, "error", ev.Err)
			return
		}
		log.Info("retry budget released requests", "scope", ev.Scope,
			"held", time.Since(ev.Since), "probes", ev.Probes, "waited", ev.Waited)
	}
}

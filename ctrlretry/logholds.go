package ctrlretry

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/kuberetry/retry"
)

// LogHolds returns a function for [retry.Budget].OnHold that logs each
// hold's start, its reminders and its end on log at Info level (logr's V(0)):
//
//	budget.OnHold = ctrlretry.LogHolds(ctrl.Log.WithName("retry"))
//
// A start is the line "retry budget holds requests" with the keys scope
// and error (the failure that started the hold). A reminder, which the
// Budget sends while the hold lasts, is "retry budget still holds
// requests" with the keys scope, held (the time since the hold started,
// read when the line is written, on real time), probes, waited (the probes
// sent and the first attempts that waited so far) and error (the latest
// failure). An end is "retry budget released requests" with the keys
// scope, held, probes and waited. An event whose Ended is false is a
// reminder when its Probes is above 0 (a start has sent none), else a start.
//
// The function keeps no goroutine and no state; it is safe for concurrent
// use when log is, as logr's sinks are. See docs/metrics.md for the lines
// an outage produces and when the reminders come.
func LogHolds(log logr.Logger) func(retry.HoldEvent) {
	return func(ev retry.HoldEvent) {
		switch {
		case ev.Ended:
			log.Info("retry budget released requests", "scope", ev.Scope,
				"held", time.Since(ev.Since), "probes", ev.Probes, "waited", ev.Waited)
		case ev.Probes > 0:
			log.Info("retry budget still holds requests", "scope", ev.Scope,
				"held", time.Since(ev.Since), "probes", ev.Probes, "waited", ev.Waited, "error", ev.Err)
		default:
			log.Info("retry budget holds requests", "scope", ev.Scope, "error", ev.Err)
		}
	}
}

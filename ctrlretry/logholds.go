package ctrlretry

import (
	"sync"
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
// reminder when the function logged the start of its scope and Since and
// not yet its end, else a start.
//
// The function keeps no goroutine; it keeps the holds it logged the start
// of until their end, and is safe for concurrent use when log is, as
// logr's sinks are. See docs/metrics.md for the lines an outage produces
// and when the reminders come.
func LogHolds(log logr.Logger) func(retry.HoldEvent) {
	var (
		mu      sync.Mutex
		started = map[holdKey]bool{}
	)
	return func(ev retry.HoldEvent) {
		key := holdKey{scope: ev.Scope, since: ev.Since}
		mu.Lock()
		reminder := !ev.Ended && started[key]
		if ev.Ended {
			delete(started, key)
		} else {
			started[key] = true
		}
		mu.Unlock()
		switch {
		case ev.Ended:
			log.Info("retry budget released requests", "scope", ev.Scope,
				"held", time.Since(ev.Since), "probes", ev.Probes, "waited", ev.Waited)
		case reminder:
			log.Info("retry budget still holds requests", "scope", ev.Scope,
				"held", time.Since(ev.Since), "probes", ev.Probes, "waited", ev.Waited, "error", ev.Err)
		default:
			log.Info("retry budget holds requests", "scope", ev.Scope, "error", ev.Err)
		}
	}
}

// holdKey names one hold of one Budget: its scope and its start.
type holdKey struct {
	scope string
	since time.Time
}

package apfsim

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/kuberetry/retry"
)

// realLevel is the priority level of the fleet on the real apiserver: 10
// seats, hand size 4 of 64 queues, queues of 20.
var realLevel = LevelConfig{
	Name: "fleet", Seats: 10, Queues: 64, HandSize: 4, QueueLengthLimit: 20,
	GetExec: 2 * time.Millisecond, PutExec: 5 * time.Millisecond, ResetDelay: time.Millisecond,
}

func smallFleet(newBudget func() *retry.Budget) Fleet {
	return Fleet{
		Processes: 48, Workers: 4, Level: realLevel, NewBudget: newBudget,
		Warmup: time.Second, Before: 2 * time.Second, Outage: 5 * time.Second,
		After: 3 * time.Second, AfterMax: 30 * time.Second,
		Pace: 500 * time.Millisecond, Bin: 100 * time.Millisecond,
	}
}

// TestFleetSmall runs 48 processes of 4 workers through a 5s outage
// without a budget and with NewBudget(): every worker comes back, the
// level's counts add up, and the budgets send fewer requests during the
// outage.
func TestFleetSmall(t *testing.T) {
	var during [2]int64
	for i, nb := range []func() *retry.Budget{nil, retry.NewBudget} {
		synctest.Test(t, func(t *testing.T) {
			r, err := smallFleet(nb).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			s := r.Summarize()
			t.Logf("budget %v: %+v", nb != nil, s)
			if s.NotBack > 0 {
				t.Errorf("budget %v: %d workers not back %v after the end", nb != nil, s.NotBack, r.Fleet.AfterMax)
			}
			arrived, ok, tooMany, reset := r.Stats.Sum(0, time.Hour)
			if gone := r.Stats.Abandoned(); arrived != ok+tooMany+reset+gone {
				t.Errorf("budget %v: %d requests arrived, %d answered 200, %d 429, %d reset and %d abandoned: want the sum", nb != nil, arrived, ok, tooMany, reset, gone)
			}
			if nb != nil && s.ProbesDuring == 0 {
				t.Errorf("no probe during the outage: the budgets held nothing")
			}
			during[i] = s.RequestsDuring
		})
	}
	if during[1] >= during[0] {
		t.Errorf("%d requests during the outage with NewBudget(), not fewer than the %d without", during[1], during[0])
	}
}

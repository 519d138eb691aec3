package retry

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestResendTable: a request whose answer client-go resends is known for
// a window, with the kind of the scope that failed (the latest answer's);
// another answer forgets it; a full set replaces its oldest; once every
// entry is a window old the table empties.
func TestResendTable(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ts := timeSource{clk}
	table := newResendTable()
	req := func(i int) *http.Request {
		r, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://h/api/v1/namespaces/default/pods/p%d", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const window = time.Second
	if failed, _, known := table.recent(req(0), ts, window); failed != noScope || known {
		t.Fatal("an empty table knows a request")
	}
	table.settle(req(0), ts, resourceScope, false, failure{})
	clk.Step(window - time.Nanosecond)
	if failed, _, known := table.recent(req(0), ts, window); failed != resourceScope || !known {
		t.Fatalf("a resend within the window after a failure of its resource: %v, %v", failed, known)
	}
	table.settle(req(0), ts, serverScope, true, failure{}) // its resend failed on the server
	if failed, _, _ := table.recent(req(0), ts, window); failed != serverScope {
		t.Fatalf("the latest failure was the server's, the table says %v", failed)
	}
	table.settle(req(0), ts, noScope, true, failure{}) // answered: forgotten
	if _, _, known := table.recent(req(0), ts, window); known {
		t.Fatal("an answered request still known")
	}

	// Fill one set beyond its ways: its oldest goes.
	sets := map[uint64][]int{}
	var same []int // resendWays+1 requests of one set
	for i := 1; same == nil; i++ {
		k := table.key(req(i)) % resendSets
		if sets[k] = append(sets[k], i); len(sets[k]) > resendWays {
			same = sets[k]
		}
	}
	for _, i := range same {
		clk.Step(time.Millisecond)
		table.settle(req(i), ts, serverScope, false, failure{})
	}
	if _, _, known := table.recent(req(same[0]), ts, window); known {
		t.Error("the full set kept its oldest entry")
	}
	if failed, _, _ := table.recent(req(same[len(same)-1]), ts, window); failed != serverScope {
		t.Error("the full set lost its newest entry")
	}
	clk.Step(window)
	if failed, _, known := table.recent(req(same[len(same)-1]), ts, window); failed != noScope || known || table.live != 0 {
		t.Errorf("a window on, the table still holds %d entries", table.live)
	}
}

package retry_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// t0 is the fake time the budget tests start at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

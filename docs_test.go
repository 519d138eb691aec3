package retry_test

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// The Go blocks of the README and the guides (docs/*.md) that need only
// the library are here, as written there, and run by these tests; those
// that need an apiserver are in the integration module. Its
// TestGuideGoBlocks fails unless every block is in some test file.

// TestGuideFakeClock runs the README's fake clock snippet: two Conflicts,
// then success, on DefaultBackoff with no jitter, slept on the fake clock.
func TestGuideFakeClock(t *testing.T) {
	t.Parallel()
	calls := 0
	update := func() error {
		if calls++; calls < 3 {
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "app", errors.New("the object has been modified"))
		}
		return nil
	}
	before := time.Now()
	clk := testingclock.NewFakeClock(time.Now()) // k8s.io/utils/clock/testing
	err := retry.RetryOnConflict(retry.DefaultBackoff, update,
		retry.WithSleeper(clk), retry.WithRand(func() float64 { return 0 }))
	after := time.Now()

	if err != nil || calls != 3 {
		t.Fatalf("RetryOnConflict: %v after %d calls, want nil after 3", err, calls)
	}
	// The fake clock started between before and after, and moved only by
	// the loop's waits: DefaultBackoff's first two steps, unjittered.
	waits := retry.DefaultBackoff.Duration * time.Duration(1+retry.DefaultBackoff.Factor)
	if start := clk.Now().Add(-waits); start.Before(before) || start.After(after) {
		t.Errorf("the fake clock moved %v, want %v (10ms and 50ms)", clk.Now().Sub(before), waits)
	}
}

package retry_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
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

// TestGuideFakeClock runs the package doc's fake clock snippet: two Conflicts,
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

// TestPackageDocSnippet fails unless the package doc's code block (the
// lines of doc.go's comment indented by a tab) is in TestGuideFakeClock's
// body as written there.
func TestPackageDocSnippet(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var block strings.Builder
	for _, l := range strings.Split(string(doc), "\n") {
		if code, ok := strings.CutPrefix(l, "//\t"); ok {
			block.WriteString("\n\t" + code) // one tab deeper: a function body
		}
	}
	if block.Len() == 0 {
		t.Fatal("doc.go has no code block")
	}
	src, err := os.ReadFile("docs_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), block.String()+"\n") {
		t.Errorf("doc.go's code block is not in TestGuideFakeClock as written:%s", block.String())
	}
}

// restConfig stands in for client-go's rest.Config, which the library's
// tests do not import: its Wrap wraps the transport as rest.Config's does.
type restConfig struct{ transport http.RoundTripper }

func (c *restConfig) Wrap(fn func(http.RoundTripper) http.RoundTripper) {
	c.transport = fn(c.transport)
}

// TestGuideBudgetOnTheWire runs docs/outages.md's first snippet: every
// request through the wrapped transport is charged to the budget.
func TestGuideBudgetOnTheWire(t *testing.T) {
	t.Parallel()
	cfg := &restConfig{transport: &wire{}}
	budget := retry.NewBudget()
	cfg.Wrap(budget.WrapTransport)

	resp, err := cfg.transport.RoundTrip(request(t, context.Background(), http.MethodGet, apiURL))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := budget.Stats(); got != (retry.BudgetStats{FirstAttempts: 1}) {
		t.Errorf("stats %+v after one request, want one first attempt", got)
	}
}

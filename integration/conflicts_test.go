package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
)

// TestConflicts runs 16 writers that each increment one shared ConfigMap
// counter 10 times through a retry loop, against a real apiserver, with
// four backoffs one after the other: a generous one of this library that
// must get every increment through, this library's DefaultRetry and
// DefaultBackoff, and client-go's retry.RetryOnConflict with its
// DefaultBackoff for comparison. For each it checks that the counter
// equals the increments reported successful (nothing lost, nothing
// doubled), that no call made more attempts than Steps, and that every
// give-up is a Conflict that used all Steps attempts.
func TestConflicts(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "conflicts-")

	// Generous: 30 attempts, and the Cap is not reached within them
	// (10ms * 1.2^28 is about 1.6s), because reaching the Cap ends the
	// loop early.
	generous := retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0, Cap: 2 * time.Second}
	tests := []struct {
		strategy   contention.Strategy
		allSucceed bool // the backoff is generous enough for every call
	}{
		{
			strategy: contention.Strategy{
				Name: "kuberetry generous", Steps: generous.Steps,
				Loop: func(ctx context.Context, fn func(context.Context) error) error {
					return retry.RetryOnConflictWithContext(ctx, generous, fn)
				},
			},
			allSucceed: true,
		},
		{
			strategy: contention.Strategy{
				Name: "kuberetry DefaultRetry", Steps: retry.DefaultRetry.Steps,
				Loop: func(ctx context.Context, fn func(context.Context) error) error {
					return retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, fn)
				},
			},
		},
		{
			strategy: contention.Strategy{
				Name: "kuberetry DefaultBackoff", Steps: retry.DefaultBackoff.Steps,
				Loop: func(ctx context.Context, fn func(context.Context) error) error {
					return retry.RetryOnConflictWithContext(ctx, retry.DefaultBackoff, fn)
				},
			},
		},
		{
			strategy: contention.Strategy{
				Name: "client-go DefaultBackoff", Steps: cgretry.DefaultBackoff.Steps,
				Loop: func(ctx context.Context, fn func(context.Context) error) error {
					return cgretry.RetryOnConflict(cgretry.DefaultBackoff, func() error { return fn(ctx) })
				},
			},
		},
	}

	const writers, updates = 16, 10
	var sums []contention.Summary
	for i, tc := range tests {
		t.Run(strings.ReplaceAll(tc.strategy.Name, " ", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, err := contention.Run(ctx, tc.strategy, contention.Config{
				Client:    s.Client,
				Namespace: ns,
				Name:      fmt.Sprintf("counter-%d", i),
				Writers:   writers,
				Updates:   updates,
			})
			if err != nil {
				t.Fatal(err)
			}
			sum := contention.Summarize(res)
			sums = append(sums, sum)
			t.Logf("%d succeeded, %d gave up, %d conflicts, %d attempts (max %d per call), wall %v",
				sum.Succeeded, sum.GaveUp, sum.Conflicts, sum.Attempts, sum.MaxAttempts, sum.Wall.Round(time.Millisecond))

			checkContention(t, res, sum, writers*updates, tc.strategy.Steps)
			if tc.allSucceed && sum.Succeeded != sum.Updates {
				t.Errorf("%d of %d calls gave up with the generous backoff", sum.GaveUp, sum.Updates)
			}
		})
	}

	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backoff\tcalls\tsucceeded\tgave up\tconflicts\tmax attempts\twall\t")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%v\t\n", s.Strategy, s.Updates, s.Succeeded, s.GaveUp, s.Conflicts, s.MaxAttempts, s.Wall.Round(time.Millisecond))
	}
	tw.Flush()
	t.Logf("%d writers x %d increments of one ConfigMap counter:\n%s", writers, updates, b.String())
}

// checkContention fails t unless a run of the contention workload kept its
// promises: every one of calls recorded; the counter equal to the
// increments that returned nil (nothing lost, nothing doubled); every
// give-up a Conflict after exactly steps attempts, since none of the
// backoffs reaches a Cap; no call over steps attempts; and at least one
// Conflict, or the run proved nothing about retries.
func checkContention(t *testing.T, res contention.Result, sum contention.Summary, calls, steps int) {
	t.Helper()
	if sum.Updates != calls {
		t.Errorf("%d calls recorded, want %d", sum.Updates, calls)
	}
	if sum.Final != sum.Succeeded {
		t.Errorf("counter is %d but %d increments returned nil: updates lost or doubled", sum.Final, sum.Succeeded)
	}
	if err := contention.FirstNonConflict(res); err != nil {
		t.Errorf("%d calls gave up with a non-Conflict error, e.g. %v", sum.GaveUpNonConflict, err)
	}
	if sum.MaxAttempts > steps {
		t.Errorf("a call made %d attempts, more than Steps %d", sum.MaxAttempts, steps)
	}
	for i, c := range res.Calls {
		if apierrors.IsConflict(c.Err) && c.Attempts != steps {
			t.Errorf("call %d gave up on a Conflict after %d attempts, want %d: %v", i, c.Attempts, steps, c.Err)
			break
		}
	}
	if sum.Conflicts == 0 {
		t.Errorf("%d calls on one object met no Conflict: the workload does not contend", calls)
	}
}

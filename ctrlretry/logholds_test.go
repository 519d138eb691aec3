package ctrlretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// lineLog is a logr.Logger that keeps each line written at its level.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 0})
}

func (l *lineLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestLogHolds(t *testing.T) {
	var log lineLog
	onHold := ctrlretry.LogHolds(log.logger())
	since := time.Now().Add(-1500 * time.Millisecond)
	failure := errors.New("the server answered 503 Service Unavailable")
	latest := errors.New("read tcp 127.0.0.1:5->127.0.0.1:6: read: connection reset by peer")
	// A start delivered after its first probe went still logs as a start.
	onHold(retry.HoldEvent{Scope: "writes of secrets", Since: since, Err: failure, Probes: 1})
	onHold(retry.HoldEvent{Scope: "writes of secrets", Since: since, Err: latest, Probes: 3, Waited: 5})
	onHold(retry.HoldEvent{Scope: "writes of secrets", Ended: true, Since: since, Err: failure, Probes: 4, Waited: 7})

	lines := log.all()
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), lines)
	}
	want := `"level"=0 "msg"="retry budget holds requests" "scope"="writes of secrets" "error"="the server answered 503 Service Unavailable"`
	if lines[0] != want {
		t.Errorf("start line\n %s\nwant\n %s", lines[0], want)
	}
	rest := heldFrom(t, lines[1], `"level"=0 "msg"="retry budget still holds requests" "scope"="writes of secrets" "held"="`, since, 1500*time.Millisecond)
	if want := ` "probes"=3 "waited"=5 "error"="` + latest.Error() + `"`; rest != want {
		t.Errorf("reminder line ends %q, want %q", rest, want)
	}
	rest = heldFrom(t, lines[2], `"level"=0 "msg"="retry budget released requests" "scope"="writes of secrets" "held"="`, since, 1500*time.Millisecond)
	if want := ` "probes"=4 "waited"=7`; rest != want {
		t.Errorf("end line ends %q, want %q", rest, want)
	}
}

// heldFrom checks that line starts with prefix and then a held duration
// from least (the time since since when the line was written, at least)
// to the time since since now, and returns the rest of the line after the
// duration's closing quote.
func heldFrom(t *testing.T, line, prefix string, since time.Time, least time.Duration) string {
	t.Helper()
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		t.Fatalf("line\n %s\nwant it to start\n %s", line, prefix)
	}
	held, rest, _ := strings.Cut(rest, `"`)
	d, err := time.ParseDuration(held)
	if most := time.Since(since); err != nil || d < least || d > most {
		t.Errorf("held %q (%v, %v): want the time since Since, from %v to %v", held, d, err, least, most)
	}
	return rest
}

// A Budget's events, logged: one start, then one end, for its one scope.
func TestLogHoldsOnBudget(t *testing.T) {
	var log lineLog
	b, clk := heldBudget(t, ctrlretry.LogHolds(log.logger()))
	clk.Step(200 * time.Millisecond)
	if err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient,
		func(context.Context) error { return nil }, retry.WithBudget(b)); err != nil {
		t.Fatal(err)
	}
	lines := log.all()
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `"msg"="retry budget holds requests" "scope"="" "error"=`) ||
		!strings.Contains(lines[1], `"msg"="retry budget released requests" "scope"="" "held"=`) ||
		!strings.HasSuffix(lines[1], fmt.Sprintf(`"probes"=%d "waited"=0`, 1)) {
		t.Fatalf("lines %q, want a start and an end of scope \"\" with 1 probe", lines)
	}
}

// A Budget's reminder, logged: a hold whose probes fail for 10s on the
// Budget's Clock gets a reminder line, with the probes so far and the
// latest failure, between its start and its end.
func TestLogHoldsReminderOnBudget(t *testing.T) {
	var log lineLog
	b, clk := heldBudget(t, ctrlretry.LogHolds(log.logger()))
	once := retry.Backoff{Steps: 1}
	for k := 1; k <= 10; k++ {
		clk.Step(time.Second) // past the next probe's time, whatever its draw
		failure := fmt.Errorf("probe %d: %w", k, errors.New("connection reset by peer"))
		if err := retry.OnErrorWithContext(context.Background(), once, retry.IsTransient,
			func(context.Context) error { return failure }, retry.WithBudget(b)); !errors.Is(err, failure) {
			t.Fatalf("probe %d returned %v, want its failure", k, err)
		}
	}
	clk.Step(time.Second)
	if err := retry.OnErrorWithContext(context.Background(), once, retry.IsTransient,
		func(context.Context) error { return nil }, retry.WithBudget(b)); err != nil {
		t.Fatal(err)
	}
	lines := log.all()
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a start, a reminder and an end: %q", len(lines), lines)
	}
	if !strings.Contains(lines[1], `"msg"="retry budget still holds requests" "scope"="" "held"=`) ||
		!strings.HasSuffix(lines[1], `"probes"=10 "waited"=0 "error"="probe 10: connection reset by peer"`) {
		t.Errorf("reminder line %q: want scope \"\", 10 probes and the latest failure", lines[1])
	}
	if !strings.Contains(lines[2], `"msg"="retry budget released requests"`) {
		t.Errorf("last line %q, want the end", lines[2])
	}
}

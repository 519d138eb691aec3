package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry/lab/internal/cluster"
)

// TestMain lets this test binary be the manager, as the command is.
func TestMain(m *testing.M) {
	exitIfManager()
	os.Exit(m.Run())
}

// TestQuick runs the command at --quick size: three runs of a manager in
// a process of its own on an in-process apiserver. Its verdicts hold (a
// busy manager with NewBudget() sent fewer requests during the outage than
// one without, logged a hold that ended; the short outage kept the
// leadership), and the output has what the guides quote: the hold's lines
// as zap wrote them, a leadership lost past the RenewDeadline.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and three managers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--quick"}, &out, cluster.NewProgress(os.Stderr)); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	t.Log(text)
	var rows []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "| busy ") || strings.HasPrefix(l, "| idle ") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows in the summary, want 3:\n%s", len(rows), text)
	}
	if !strings.Contains(rows[2], "| lost, exited at ") {
		t.Errorf("the idle manager through an outage past the RenewDeadline: %s, want lost and exited", rows[2])
	}
	for _, r := range rows[:2] {
		if !strings.Contains(r, "| kept |") {
			t.Errorf("a busy manager through a 2s outage: %s, want its leadership kept", r)
		}
	}
	// The hold's lines are zap's JSON: a start with its error, an end
	// with held in seconds.
	var starts, ends int
	for _, l := range strings.Split(text, "\n") {
		_, js, ok := strings.Cut(l, "s {")
		if !ok || !strings.Contains(l, `"msg":"retry budget `) {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte("{"+js), &fields); err != nil {
			t.Fatalf("hold line %q: %v", l, err)
		}
		if fields["logger"] != "retry" || fields["level"] != "info" || fields["scope"] == "" {
			t.Errorf("hold line %q: want logger retry, level info, a scope", l)
		}
		switch fields["msg"] {
		case holdStart:
			starts++
			if fields["error"] == nil {
				t.Errorf("start line %q has no error", l)
			}
		case holdEnd:
			ends++
			if held, ok := fields["held"].(float64); !ok || held <= 0 {
				t.Errorf("end line %q: held %v, want seconds above 0", l, fields["held"])
			}
		}
	}
	if starts == 0 || ends == 0 {
		t.Errorf("%d hold starts and %d ends printed, want some of each", starts, ends)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP x a counter
# TYPE x counter
operator_lab_wire_requests_total{kind="lease"} 4
operator_lab_wire_requests_total{kind="other"} 10
kuberetry_budget_hold_seconds{scope="https://127.0.0.1:1"} 1.5
workqueue_retries_total{controller="copy",name="copy"} 3
`
	s, err := parseMetrics(bufio.NewScanner(strings.NewReader(text)), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sum("operator_lab_wire_requests_total"); got != 14 {
		t.Errorf("sum = %v, want 14", got)
	}
	if got := s.sum("operator_lab_wire_requests_total", `kind="lease"`); got != 4 {
		t.Errorf("leases = %v, want 4", got)
	}
	if !s.has("kuberetry_budget_hold_seconds") || s.has("kuberetry_budget") {
		t.Error("has: want the gauge's family found by its whole name only")
	}
	later, err := parseMetrics(bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, "} 3", "} 5"))), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if m := moved(s, later, "workqueue_", "operator_lab_"); len(m) != 1 || m[0].name != "workqueue_retries_total" || m[0].by != 2 {
		t.Errorf("moved = %v, want workqueue_retries_total +2", m)
	}
	if _, err := parseMetrics(bufio.NewScanner(strings.NewReader("novalue\n")), time.Now()); err == nil {
		t.Error("a line without a value parsed")
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		text, kind string
		zap        bool
	}{
		{`{"level":"error","ts":"2026-12-05T21:40:01Z","msg":"Reconciler error","controller":"copy","error":"x"}`, "Reconciler error", true},
		{`E1205 21:40:01.123456   12345 reflector.go:204] "Failed to watch" err="x"`, "klog reflector.go:204: Failed to watch", false},
		{`E1205 21:40:01.123456   12345 leaderelection.go:436] error retrieving resource lock ns/x: Get "https://..."`, "klog leaderelection.go:436: error retrieving resource lock ns/x", false},
		{`panic: oops`, "other", false},
	} {
		kind, zap := kindOf(c.text)
		if kind != c.kind || zap != c.zap {
			t.Errorf("kindOf(%q) = %q, %v; want %q, %v", c.text, kind, zap, c.kind, c.zap)
		}
	}
}

func TestCutStacktrace(t *testing.T) {
	in := `{"level":"error","msg":"Reconciler error","error":"x \"y\"","stacktrace":"a.b\n\t/x.go:1 \"q\""}`
	want := `{"level":"error","msg":"Reconciler error","error":"x \"y\"","stacktrace":"..."}`
	if got := cutStacktrace(in); got != want {
		t.Errorf("cutStacktrace = %s, want %s", got, want)
	}
}

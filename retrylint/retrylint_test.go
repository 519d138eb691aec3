package retrylint_test

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/kuberetry/retry/retrylint"
)

// TestRules runs every rule over the test packages, each of which marks
// what must be reported with a want comment; the lines without one must
// report nothing.
func TestRules(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), retrylint.Analyzer, "typed", "ctrl", "wrapper", "nested")
}

// TestCachedRead runs the analyzer with -cached-read over the cached reads
// and the guide's examples.
func TestCachedRead(t *testing.T) {
	if err := retrylint.Analyzer.Flags.Set("cached-read", "true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = retrylint.Analyzer.Flags.Set("cached-read", "false") })
	analysistest.Run(t, analysistest.TestData(), retrylint.Analyzer, "cached", "guide")
}

// TestStaleObjectFix applies stale-object's suggested fixes and compares
// the result with the golden file (testdata/src/fix/fix.go.golden).
func TestStaleObjectFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), retrylint.Analyzer, "fix")
}

// TestCachedReadOff runs the analyzer without -cached-read over the package
// whose cached reads it reports with the flag: each of its want comments
// must go unmatched, and nothing else be reported.
func TestCachedReadOff(t *testing.T) {
	rec := &recorder{}
	analysistest.Run(rec, analysistest.TestData(), retrylint.Analyzer, "cached")
	const wants = 5 // the want comments of testdata/src/cached
	missed := 0
	for _, e := range rec.errors {
		if !strings.Contains(e, "no diagnostic was reported matching `^cached-read: ") {
			t.Errorf("without -cached-read: %s", e)
			continue
		}
		missed++
	}
	if missed != wants {
		t.Errorf("without -cached-read: %d cached-read wants missed, want all %d", missed, wants)
	}
}

// recorder is an analysistest.Testing that keeps the errors.
type recorder struct{ errors []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

package retrylint

import (
	"flag"
	"go/ast"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Analyzer reports the mistakes of a Conflict-retry closure, each in one of
// five categories (stale-object, cached-read, lost-conflict, dropped-error,
// nested-retry); see the package documentation. Its flag -cached-read
// turns on the cached-read reports, off by default. It keeps no state
// between passes and may run on many packages at once.
var Analyzer = newAnalyzer()

// The categories, each a report's first word and its Diagnostic.Category.
const (
	catStale     = "stale-object"
	catCached    = "cached-read"
	catLost      = "lost-conflict"
	catDropped   = "dropped-error"
	catNested    = "nested-retry"
	docURL       = "https://github.com/kuberetry/retry/blob/main/docs/retrylint.md"
	cachedReadFl = "cached-read"
)

func newAnalyzer() *analysis.Analyzer {
	a := &analysis.Analyzer{
		Name: "retrylint",
		Doc: "report the mistakes of a Conflict-retry closure (retry.RetryOnConflict and the like)\n\n" +
			"Categories: stale-object (a write of an object read before the loop), cached-read " +
			"(a lister or cache read in the closure; only with -cached-read), lost-conflict (a write's " +
			"error formatted without %w), dropped-error (a write's error discarded), nested-retry " +
			"(a retry loop inside the closure).",
		URL:      docURL,
		Requires: []*analysis.Analyzer{inspect.Analyzer},
		Flags:    *flag.NewFlagSet("retrylint", flag.ExitOnError),
	}
	cached := a.Flags.Bool(cachedReadFl, false,
		"also report reads from a lister or a cache.Store inside a Conflict-retry closure")
	a.Run = func(pass *analysis.Pass) (any, error) {
		run(pass, *cached)
		return nil, nil
	}
	return a
}

func run(pass *analysis.Pass, cachedRead bool) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.WithStack([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if !push {
			return true
		}
		call := n.(*ast.CallExpr)
		lit := conflictClosure(pass.TypesInfo, call)
		if lit == nil {
			return true
		}
		c := newClosure(pass, call, lit, stack)
		c.checkWrites()
		c.checkLostConflict()
		c.checkNested()
		if cachedRead {
			c.checkCachedReads()
		}
		return true
	})
}

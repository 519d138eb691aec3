package retrylint

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/types/typeutil"
)

// The packages whose functions the rules know, by import path.
const (
	clientGoRetry = "k8s.io/client-go/util/retry"
	thisModule    = "github.com/kuberetry/retry"
	ctrlRetry     = "github.com/kuberetry/retry/ctrlretry"
	apiErrors     = "k8s.io/apimachinery/pkg/api/errors"
	ctrlClient    = "sigs.k8s.io/controller-runtime/pkg/client"
	clientGoCache = "k8s.io/client-go/tools/cache"
)

// loopArgs says where a retry loop takes its closure (fn) and its
// predicate (pred, -1 for a loop that retries Conflicts only); ok is false
// for every other function.
func loopArgs(fn *types.Func) (fnIdx, pred int, ok bool) {
	if fn == nil || fn.Pkg() == nil || fn.Signature().Recv() != nil {
		return 0, 0, false
	}
	switch fn.Pkg().Path() {
	case clientGoRetry:
		switch fn.Name() {
		case "RetryOnConflict":
			return 1, -1, true
		case "OnError":
			return 2, 1, true
		}
	case thisModule:
		switch fn.Name() {
		case "RetryOnConflict":
			return 1, -1, true
		case "RetryOnConflictWithContext":
			return 2, -1, true
		case "OnError", "OnRetryAfterError":
			return 2, 1, true
		case "OnErrorWithContext", "OnErrorValue", "OnRetryAfterErrorWithContext":
			return 3, 2, true
		}
	}
	return 0, 0, false
}

// isWriteLoop reports whether fn is a write loop of this module or of
// ctrlretry, each a retry loop of its own.
func isWriteLoop(fn *types.Func) bool {
	if fn == nil || fn.Pkg() == nil || fn.Signature().Recv() != nil {
		return false
	}
	switch fn.Pkg().Path() {
	case thisModule:
		switch fn.Name() {
		case "Update", "UpdateStatus", "Patch", "Ensure", "CreateOrUpdate", "UpdateOnConflict", "PatchOnConflict":
			return true
		}
	case ctrlRetry:
		return fn.Name() == "CreateOrUpdate" || fn.Name() == "CreateOrPatch"
	}
	return false
}

// callee is the function or method a call statically calls, its generic
// origin for an instantiation (as typeutil.Callee gives it); nil for a
// call of a function value.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(info, call).(*types.Func)
	return fn
}

// recvNamed returns the named type of fn's receiver, its pointer taken
// off; nil for a function, or a receiver of no named type.
func recvNamed(fn *types.Func) *types.Named {
	recv := fn.Signature().Recv()
	if recv == nil {
		return nil
	}
	t := types.Unalias(recv.Type())
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	named, _ := t.(*types.Named)
	return named
}

// conflictClosure returns the function literal a call gives a retry loop
// as its closure, when the loop retries Conflicts: nil otherwise.
func conflictClosure(info *types.Info, call *ast.CallExpr) *ast.FuncLit {
	fnIdx, pred, ok := loopArgs(callee(info, call))
	if !ok || fnIdx >= len(call.Args) {
		return nil
	}
	if pred >= 0 && (pred >= len(call.Args) || !acceptsConflicts(info, call.Args[pred])) {
		return nil
	}
	lit, _ := ast.Unparen(call.Args[fnIdx]).(*ast.FuncLit)
	return lit
}

// acceptsConflicts reports whether a predicate is apimachinery's
// IsConflict, or a function literal that calls it.
func acceptsConflicts(info *types.Info, pred ast.Expr) bool {
	pred = ast.Unparen(pred)
	if lit, ok := pred.(*ast.FuncLit); ok {
		found := false
		ast.Inspect(lit.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && isIsConflict(callee(info, call)) {
				found = true
			}
			return !found
		})
		return found
	}
	var id *ast.Ident
	switch e := pred.(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return false
	}
	fn, _ := info.Uses[id].(*types.Func)
	return isIsConflict(fn)
}

func isIsConflict(fn *types.Func) bool {
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == apiErrors && fn.Name() == "IsConflict"
}

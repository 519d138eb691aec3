package retrylint

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"
)

// checkLostConflict reports an fmt.Errorf or errors.New whose error the
// closure returns (directly, or through a variable it returns) built from
// a write's error without %w: the loop sees no Conflict.
func (c *closure) checkLostConflict() {
	if len(c.writeErrs) == 0 {
		return
	}
	info := c.pass.TypesInfo
	returned := map[*types.Var]bool{}
	var results []ast.Expr
	c.direct(func(n ast.Node) {
		if r, ok := n.(*ast.ReturnStmt); ok {
			for _, e := range r.Results {
				results = append(results, e)
				if id, ok := ast.Unparen(e).(*ast.Ident); ok {
					if v := identVar(info, id); v != nil {
						returned[v] = true
					}
				}
			}
		}
	})
	c.direct(func(n ast.Node) {
		if s, ok := n.(*ast.AssignStmt); ok && len(s.Lhs) == len(s.Rhs) {
			for i, lhs := range s.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && returned[identVar(info, id)] {
					results = append(results, s.Rhs[i])
				}
			}
		}
	})
	for _, e := range results {
		call, ok := ast.Unparen(e).(*ast.CallExpr)
		if !ok {
			continue
		}
		if v := c.lostIn(call); v != nil {
			c.report(call, catLost,
				"the closure returns the error of a write (%s) formatted without %%w: the loop "+
					"no longer sees a Conflict and does not retry; wrap it with %%w (or call "+
					"retry.Update, ctrlretry.CreateOrUpdate with controller-runtime, which "+
					"return the write's error as it is)", v.Name())
		}
	}
}

// lostIn returns the write's error a call of fmt.Errorf or errors.New
// turns into text, nil when it keeps every one of them (%w) or is another
// call.
func (c *closure) lostIn(call *ast.CallExpr) *types.Var {
	info := c.pass.TypesInfo
	fn := callee(info, call)
	if fn == nil || fn.Pkg() == nil || len(call.Args) == 0 {
		return nil
	}
	var args []ast.Expr
	verbs := []rune(nil)
	switch {
	case fn.Pkg().Path() == "errors" && fn.Name() == "New",
		fn.Pkg().Path() == "github.com/pkg/errors" && fn.Name() == "New":
		args = call.Args
	case fn.Pkg().Path() == "fmt" && fn.Name() == "Errorf":
		args = call.Args[1:]
		if tv, ok := info.Types[call.Args[0]]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
			verbs = formatVerbs(constant.StringVal(tv.Value))
		}
		if v := c.mentionsWriteErr(call.Args[0]); v != nil {
			return v // fmt.Errorf(err.Error())
		}
	default:
		return nil
	}
	for i, a := range args {
		id, ok := ast.Unparen(a).(*ast.Ident)
		if ok && c.isWriteErr(id) {
			if i < len(verbs) && verbs[i] != 'w' {
				return identVar(info, id)
			}
			continue
		}
		if v := c.mentionsWriteErr(a); v != nil {
			return v // err.Error(), fmt.Sprint(err), ...
		}
	}
	return nil
}

// mentionsWriteErr returns a write's error an expression uses, nil if none.
func (c *closure) mentionsWriteErr(e ast.Expr) *types.Var {
	var found *types.Var
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && found == nil && c.isWriteErr(id) {
			found = identVar(c.pass.TypesInfo, id)
		}
		return found == nil
	})
	return found
}

// formatVerbs returns the verb of each argument a format consumes, in
// order ('*' for a width or precision argument).
func formatVerbs(format string) []rune {
	var verbs []rune
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.ContainsRune("+-# 0123456789.[]*", rune(format[i])) {
			if format[i] == '*' {
				verbs = append(verbs, '*')
			}
			i++
		}
		if i < len(format) && format[i] != '%' {
			verbs = append(verbs, rune(format[i]))
		}
	}
	return verbs
}

// calleeName is how a report names a call: the method or function with
// its receiver's or package's name.
func calleeName(info *types.Info, call *ast.CallExpr) string {
	fn := callee(info, call)
	if fn == nil {
		return "the call"
	}
	if fn.Signature().Recv() != nil {
		if n := recvNamed(fn); n != nil {
			return n.Obj().Name() + "." + fn.Name()
		}
		return fn.Name()
	}
	return fn.Pkg().Name() + "." + fn.Name()
}

// isWriteErr reports whether an identifier uses a variable that holds a
// write's error at that point: after the write assigned it.
func (c *closure) isWriteErr(id *ast.Ident) bool {
	p, ok := c.writeErrs[identVar(c.pass.TypesInfo, id)]
	return ok && id.Pos() > p
}

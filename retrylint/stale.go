package retrylint

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/printer"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// checkWrites reports the writes whose error is discarded (dropped-error)
// and those of a stale object (stale-object).
func (c *closure) checkWrites() {
	for _, w := range c.writes {
		name := calleeName(c.pass.TypesInfo, w.call)
		if w.dropped {
			c.report(w.call, catDropped,
				"the error of %s is discarded, so the loop never sees a Conflict and "+
					"retries nothing: return it from the closure (or call retry.Update, "+
					"ctrlretry.CreateOrUpdate with controller-runtime, which keep it)", name)
		}
		outer := c.staleSource(w.obj)
		if outer == nil {
			continue
		}
		d := analysis.Diagnostic{
			Pos: w.call.Pos(), End: w.call.End(), Category: catStale,
			Message: catStale + ": " + fmt.Sprintf("%s writes %s, read before the loop and not "+
				"read again in the closure: every retry sends the same resourceVersion and "+
				"meets the same Conflict; read %s again at the top of the closure, or call "+
				"retry.Update (ctrlretry.CreateOrUpdate with controller-runtime), which reads, "+
				"changes and writes it on each attempt", name, outer.Name(), outer.Name()),
		}
		if fix, ok := c.rereadFix(outer); ok {
			d.SuggestedFixes = []analysis.SuggestedFix{fix}
		}
		c.pass.Report(d)
	}
}

// staleSource returns the variable declared outside the closure whose copy
// a write's object is, when the closure never refreshes it: the object is
// that variable (x, &x), or a DeepCopy the closure makes of it (directly,
// or in a variable of its own defined once). It returns nil otherwise.
func (c *closure) staleSource(obj ast.Expr) *types.Var {
	info := c.pass.TypesInfo
	if from := deepCopyOf(obj); from != nil {
		return c.staleSource(from)
	}
	e := ast.Unparen(obj)
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = ast.Unparen(u.X)
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	v := identVar(info, id)
	if v == nil || c.refreshed[v] {
		return nil
	}
	if !c.inside(v.Pos()) {
		return v
	}
	def := c.defs[v]
	if def == nil {
		return nil
	}
	if from := deepCopyOf(def); from != nil {
		return c.staleSource(from)
	}
	return nil
}

// deepCopyOf returns x of x.DeepCopy() and x.DeepCopyObject().(T), nil for
// any other expression.
func deepCopyOf(e ast.Expr) ast.Expr {
	e = ast.Unparen(e)
	if ta, ok := e.(*ast.TypeAssertExpr); ok {
		e = ast.Unparen(ta.X)
	}
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return nil
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "DeepCopy" && sel.Sel.Name != "DeepCopyObject") {
		return nil
	}
	return sel.X
}

// rereadFix is the fix of a stale object v: the read that produced it,
// made again at the top of the closure. It applies when the closure
// returns only an error and the read is a statement, before the loop, of
// a block around it in the same function: v, err := c.Get(...) (repeated
// as v, err = c.Get(...)) or controller-runtime's c.Get(ctx, key, v).
// The read before the loop stays: the code before the loop may need it.
func (c *closure) rereadFix(v *types.Var) (analysis.SuggestedFix, bool) {
	res := c.lit.Type.Results
	if res == nil || len(res.List) != 1 || len(res.List[0].Names) > 1 ||
		!isError(c.pass.TypesInfo.TypeOf(res.List[0].Type)) {
		return analysis.SuggestedFix{}, false
	}
	read := c.producingRead(v)
	if read == "" {
		return analysis.SuggestedFix{}, false
	}
	indent := "\t"
	if len(c.lit.Body.List) > 0 {
		col := c.pass.Fset.Position(c.lit.Body.List[0].Pos()).Column
		indent = strings.Repeat("\t", max(col-1, 1))
	}
	text := "\n" + indent + strings.ReplaceAll(read, "\n", "\n"+indent)
	return analysis.SuggestedFix{
		Message: "read " + v.Name() + " again at the top of the closure",
		TextEdits: []analysis.TextEdit{{
			Pos: c.lit.Body.Lbrace + 1, End: c.lit.Body.Lbrace + 1, NewText: []byte(text),
		}},
	}, true
}

// producingRead returns the statements that read v again in the closure,
// built from the last read of v before the loop in a block around it; ""
// when there is none.
func (c *closure) producingRead(v *types.Var) string {
	info := c.pass.TypesInfo
	found := ""
	for i := len(c.stack) - 1; i >= 0 && found == ""; i-- {
		switch n := c.stack[i].(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			return ""
		case *ast.BlockStmt:
			for _, st := range n.List {
				if st.End() > c.loop.Pos() {
					break
				}
				if s := c.readStmt(info, st, v); s != "" {
					found = s
				}
			}
		}
	}
	if found == "" || c.assignedElsewhere(v) {
		return "" // which value v holds at the loop is not one read's
	}
	return found
}

// assignedElsewhere reports whether v is assigned more than once in the
// function around the loop, outside the closure.
func (c *closure) assignedElsewhere(v *types.Var) bool {
	var fn ast.Node
	for i := len(c.stack) - 1; i >= 0 && fn == nil; i-- {
		switch c.stack[i].(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			fn = c.stack[i]
		}
	}
	count := 0
	ast.Inspect(fn, func(n ast.Node) bool {
		if n == c.lit {
			return false
		}
		if s, ok := n.(*ast.AssignStmt); ok {
			for _, lhs := range s.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && identVar(c.pass.TypesInfo, id) == v {
					count++
				}
			}
		}
		return count < 2
	})
	return count > 1
}

// readStmt returns the re-read of v a statement makes possible, "" if it
// does not read v.
func (c *closure) readStmt(info *types.Info, st ast.Stmt, v *types.Var) string {
	if ifs, ok := st.(*ast.IfStmt); ok && ifs.Init != nil {
		st = ifs.Init
	}
	switch s := st.(type) {
	case *ast.AssignStmt:
		if len(s.Lhs) == 2 && len(s.Rhs) == 1 {
			obj, _ := s.Lhs[0].(*ast.Ident)
			errID, _ := s.Lhs[1].(*ast.Ident)
			call, _ := ast.Unparen(s.Rhs[0]).(*ast.CallExpr)
			if obj == nil || errID == nil || errID.Name == "_" || call == nil ||
				identVar(info, obj) != v || !isReadReturning(info, call) {
				return ""
			}
			return obj.Name + ", " + errID.Name + " = " + c.source(call) +
				"\nif " + errID.Name + " != nil {\n\treturn " + errID.Name + "\n}"
		}
		if len(s.Rhs) == 1 {
			return c.crGet(info, s.Rhs[0], v)
		}
	case *ast.ExprStmt:
		return c.crGet(info, s.X, v)
	}
	return ""
}

// crGet returns the re-read of v for controller-runtime's Get into it.
func (c *closure) crGet(info *types.Info, e ast.Expr, v *types.Var) string {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || !isControllerRuntimeGet(info, call) || len(call.Args) == 0 ||
		rootVar(info, call.Args[len(call.Args)-1]) != v {
		return ""
	}
	return "if err := " + c.source(call) + "; err != nil {\n\treturn err\n}"
}

func (c *closure) source(n ast.Node) string {
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, c.pass.Fset, n); err != nil {
		return ""
	}
	return buf.String()
}

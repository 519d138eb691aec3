package retrylint

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
)

// A closure is one Conflict-retry closure and what the rules need of it,
// gathered in two walks of its body.
type closure struct {
	pass  *analysis.Pass
	loop  *ast.CallExpr // the retry loop's call
	lit   *ast.FuncLit  // the closure given to it
	stack []ast.Node    // the nodes around loop, outermost first

	writes    []write
	writeErrs map[*types.Var]token.Pos // variables that hold a write's error, from where
	// refreshed holds the variables assigned, read into, given by address
	// or given a resourceVersion anywhere in the closure.
	refreshed map[*types.Var]bool
	// defs holds, for a variable declared in the closure, the value of its
	// only definition (nil when it has several, or a define without one).
	defs map[*types.Var]ast.Expr
}

// A write is an Update or UpdateStatus call made directly in the closure.
type write struct {
	call    *ast.CallExpr
	obj     ast.Expr // its object argument
	dropped bool     // its error is discarded
}

func newClosure(pass *analysis.Pass, loop *ast.CallExpr, lit *ast.FuncLit, stack []ast.Node) *closure {
	c := &closure{
		pass: pass, loop: loop, lit: lit, stack: stack,
		writeErrs: map[*types.Var]token.Pos{},
		refreshed: map[*types.Var]bool{},
		defs:      map[*types.Var]ast.Expr{},
	}
	c.collectWrites()
	c.collectAssignments()
	return c
}

// direct calls f on each node of the closure's body outside the function
// literals nested in it: the calls the closure itself makes.
func (c *closure) direct(f func(ast.Node)) {
	ast.Inspect(c.lit.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if n != nil {
			f(n)
		}
		return true
	})
}

// collectWrites finds the writes and which of their errors are discarded.
func (c *closure) collectWrites() {
	info := c.pass.TypesInfo
	asWrite := func(e ast.Expr) (*ast.CallExpr, int) {
		call, ok := ast.Unparen(e).(*ast.CallExpr)
		if !ok {
			return nil, -1
		}
		return call, writeObject(info, call)
	}
	dropped := map[*ast.CallExpr]bool{} // writes whose error is discarded
	c.direct(func(n ast.Node) {
		switch s := n.(type) {
		case *ast.ExprStmt:
			if call, i := asWrite(s.X); i >= 0 {
				dropped[call] = true
			}
		case *ast.GoStmt:
			if _, i := asWrite(s.Call); i >= 0 {
				dropped[s.Call] = true
			}
		case *ast.DeferStmt:
			if _, i := asWrite(s.Call); i >= 0 {
				dropped[s.Call] = true
			}
		case *ast.AssignStmt:
			if len(s.Rhs) != 1 {
				return
			}
			call, i := asWrite(s.Rhs[0])
			if i < 0 {
				return
			}
			last, _ := s.Lhs[len(s.Lhs)-1].(*ast.Ident)
			if last == nil {
				return
			}
			if last.Name == "_" {
				dropped[call] = true
				return
			}
			if v := identVar(info, last); v != nil {
				if p, ok := c.writeErrs[v]; !ok || s.Pos() < p {
					c.writeErrs[v] = s.Pos()
				}
			}
		case *ast.CallExpr:
			if i := writeObject(info, s); i >= 0 {
				c.writes = append(c.writes, write{call: s, obj: s.Args[i]})
			}
		}
	})
	for i := range c.writes {
		c.writes[i].dropped = dropped[c.writes[i].call]
	}
}

// collectAssignments finds, anywhere in the closure (nested function
// literals included), what refreshes a variable, and the definitions of
// the closure's own variables.
func (c *closure) collectAssignments() {
	info := c.pass.TypesInfo
	assigned := map[*types.Var]int{}
	written := map[ast.Expr]bool{} // &x given to a write, which does not set x
	ast.Inspect(c.lit.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range s.Lhs {
				c.assignTo(lhs)
				id, ok := lhs.(*ast.Ident)
				if !ok {
					continue
				}
				v := identVar(info, id)
				if v == nil {
					continue
				}
				assigned[v]++
				if s.Tok == token.DEFINE && len(s.Lhs) == len(s.Rhs) && c.inside(v.Pos()) {
					c.defs[v] = s.Rhs[i]
				}
			}
		case *ast.ValueSpec:
			for i, id := range s.Names {
				v := identVar(info, id)
				if v == nil {
					continue
				}
				assigned[v]++
				if len(s.Values) == len(s.Names) {
					c.defs[v] = s.Values[i]
				}
			}
		case *ast.RangeStmt:
			if s.Tok == token.ASSIGN {
				c.assignTo(s.Key)
				c.assignTo(s.Value)
			}
		case *ast.UnaryExpr:
			if s.Op == token.AND && !written[s] {
				c.mark(rootVar(info, s.X))
			}
		case *ast.CallExpr:
			if i := writeObject(info, s); i >= 0 {
				written[ast.Unparen(s.Args[i])] = true
			}
			if i := readInto(info, s); i >= 0 {
				c.mark(rootVar(info, s.Args[i]))
			}
			for _, i := range c.readsInto(s) {
				c.mark(rootVar(info, s.Args[i]))
			}
			if sel, ok := ast.Unparen(s.Fun).(*ast.SelectorExpr); ok && sel.Sel.Name == "SetResourceVersion" {
				c.mark(rootVar(info, sel.X))
			}
		}
		return true
	})
	for v, n := range assigned {
		if n > 1 {
			delete(c.defs, v)
		}
	}
}

// assignTo marks what an assignment's left side refreshes: the variable
// itself, what it points to (*v = ...), or its version (v.ResourceVersion,
// v.ObjectMeta, an unstructured v.Object).
func (c *closure) assignTo(lhs ast.Expr) {
	if lhs == nil {
		return
	}
	info := c.pass.TypesInfo
	switch e := ast.Unparen(lhs).(type) {
	case *ast.Ident:
		v := identVar(info, e)
		if v != nil && c.inside(v.Pos()) {
			return // a variable of the closure: its definitions are in defs
		}
		c.mark(v)
	case *ast.StarExpr:
		c.mark(rootVar(info, e.X))
	case *ast.SelectorExpr:
		switch e.Sel.Name {
		case "ResourceVersion", "ObjectMeta", "Object":
			c.mark(rootVar(info, e.X))
		}
	}
}

func (c *closure) mark(v *types.Var) {
	if v != nil {
		c.refreshed[v] = true
	}
}

// inside reports whether pos is in the closure.
func (c *closure) inside(pos token.Pos) bool {
	return pos.IsValid() && c.lit.Pos() <= pos && pos < c.lit.End()
}

func (c *closure) report(at ast.Node, category, format string, args ...any) {
	c.pass.Report(analysis.Diagnostic{
		Pos: at.Pos(), End: at.End(), Category: category,
		Message: category + ": " + fmt.Sprintf(format, args...),
	})
}

// identVar is the variable an identifier declares or uses, nil if none.
func identVar(info *types.Info, id *ast.Ident) *types.Var {
	if obj := info.Defs[id]; obj != nil {
		v, _ := obj.(*types.Var)
		return v
	}
	v, _ := info.Uses[id].(*types.Var)
	return v
}

// rootVar is the variable at the root of x, x.f, x.f.g, &x, *x: the
// variable whose object an expression names; nil if none.
func rootVar(info *types.Info, e ast.Expr) *types.Var {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			v := identVar(info, x)
			if v != nil && v.IsField() {
				return nil
			}
			return v
		case *ast.SelectorExpr:
			e = x.X
		case *ast.UnaryExpr:
			if x.Op != token.AND {
				return nil
			}
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// readsInto returns the arguments a call of a function of this package
// reads into: those whose parameter the function's body (its function
// literals included) gives to a read (a Get, DeepCopyInto), as a test's
// helper getResourceFunc(ctx, key, obj) does. One level deep.
func (c *closure) readsInto(call *ast.CallExpr) []int {
	fn := callee(c.pass.TypesInfo, call)
	if fn == nil || fn.Pkg() != c.pass.Pkg {
		return nil
	}
	decl := c.funcDecl(fn)
	if decl == nil || decl.Body == nil {
		return nil
	}
	params := map[*types.Var]int{}
	i := 0
	for _, f := range decl.Type.Params.List {
		for _, name := range f.Names {
			if v, ok := c.pass.TypesInfo.Defs[name].(*types.Var); ok {
				params[v] = i
			}
			i++
		}
		if len(f.Names) == 0 {
			i++
		}
	}
	var args []int
	ast.Inspect(decl.Body, func(n ast.Node) bool {
		if call2, ok := n.(*ast.CallExpr); ok {
			if j := readInto(c.pass.TypesInfo, call2); j >= 0 {
				if k, ok := params[rootVar(c.pass.TypesInfo, call2.Args[j])]; ok && k < len(call.Args) {
					args = append(args, k)
				}
			}
		}
		return true
	})
	return args
}

// funcDecl returns the declaration of a function of this package.
func (c *closure) funcDecl(fn *types.Func) *ast.FuncDecl {
	for _, f := range c.pass.Files {
		if f.Pos() > fn.Pos() || fn.Pos() >= f.End() {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Pos() == fn.Pos() {
				return fd
			}
		}
	}
	return nil
}

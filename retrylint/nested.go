package retrylint

import "go/ast"

// checkNested reports a retry loop, or a write loop of this module or of
// ctrlretry, that the closure calls: each of its attempts runs a whole
// inner loop.
func (c *closure) checkNested() {
	c.direct(func(n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		fn := callee(c.pass.TypesInfo, call)
		_, _, isLoop := loopArgs(fn)
		if !isLoop && !isWriteLoop(fn) {
			return
		}
		c.report(call, catNested,
			"%s is a retry loop inside a Conflict-retry closure: the attempts multiply (the "+
				"inner loop's for each outer one); keep one loop, the inner one alone or "+
				"a single retry.Update (ctrlretry.CreateOrUpdate with controller-runtime)",
			calleeName(c.pass.TypesInfo, call))
	})
}

package retrylint

import "go/ast"

// checkCachedReads reports a read of an informer's cache in the closure:
// after a Conflict the cache may still hold the version that conflicted.
func (c *closure) checkCachedReads() {
	c.direct(func(n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isCachedRead(c.pass.TypesInfo, call) {
			return
		}
		c.report(call, catCached,
			"%s reads an informer's cache, which after a Conflict may still hold the version "+
				"that conflicted: the retry writes it again in vain; read from the API server "+
				"in the closure (a client's Get), or call retry.Update "+
				"(ctrlretry.CreateOrUpdate with controller-runtime), which does",
			calleeName(c.pass.TypesInfo, call))
	})
}

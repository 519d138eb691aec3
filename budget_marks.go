package retry

import "context"

// attemptKey is the context key under which a loop marks an attempt.
type attemptKey struct{}

// attemptCtx is the context a loop passes to an attempt's fn when a
// transport needs to know about it: the loop charges a Budget on the wire
// itself, or the attempt follows a transient failure.
type attemptCtx struct {
	context.Context
	budget *Budget     // the loop's own Budget, which charged the attempt; nil if none
	retry  bool        // this attempt, or an enclosing loop's, follows a transient failure
	outer  *attemptCtx // the mark of an enclosing loop's attempt, if any
}

// markOf returns ctx's mark, nil if none.
func markOf(ctx context.Context) *attemptCtx {
	c, _ := ctx.Value(attemptKey{}).(*attemptCtx)
	return c
}

func markAttempt(ctx context.Context, own *Budget, afterTransient bool) context.Context {
	outer := markOf(ctx)
	return &attemptCtx{Context: ctx, budget: own, retry: afterTransient || outer.afterTransient(), outer: outer}
}

func (c *attemptCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// chargedBy reports whether the loop of this attempt, or of an enclosing
// one, charges b itself.
func (c *attemptCtx) chargedBy(b *Budget) bool {
	for ; c != nil; c = c.outer {
		if c.budget == b {
			return true
		}
	}
	return false
}

func (c *attemptCtx) afterTransient() bool { return c != nil && c.retry }

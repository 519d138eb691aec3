package retry

import (
	"context"
	"errors"
)

// outcome is what an attempt's result says about the server, for a
// [Budget]'s hold and for the transport's view of the next attempt.
type outcome uint8

const (
	// answered: a success, or an error the server gave that another
	// attempt would meet as well (a Conflict, a NotFound).
	answered outcome = iota
	// failedTransiently: a failure another attempt may not meet.
	failedTransiently
	// unanswered: a context ended the attempt first.
	unanswered
	// budgetRefused: a Budget refused the attempt or its request, which
	// so never reached the server.
	budgetRefused
)

// judge is the one place that decides whether an attempt that returned
// err failed transiently: [IsTransient] holds for it, and it is not a
// Conflict (the quota admission's is the server's answer too). A refusal
// by a Budget (the transport's, or an inner loop's), and a context's
// error, say nothing about the server.
func judge(err error) outcome {
	switch {
	case err == nil:
		return answered
	case errors.Is(err, ErrBudgetExhausted):
		return budgetRefused
	case transient(err, false):
		return failedTransiently
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return unanswered
	}
	return answered
}

package retry

import "errors"

// inTree reports whether err matches target (errors.Is): the test the
// Budget's files make for ErrBudgetExhausted, which no error's Is method
// claims.
func inTree(err, target error) bool { return errors.Is(err, target) }

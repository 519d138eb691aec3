package retry_test

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var errDown = apierrors.NewServiceUnavailable("the apiserver is down")

func always(error) bool { return true }

// quotaConflict is the 409 that a kube-apiserver's ResourceQuota admission
// returns when another kube-apiserver updated the namespace's quota first.
func quotaConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "quota",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// conflict returns a distinct 409 Conflict, so tests can tell which attempt's
// error came back.
func conflict(n int) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, fmt.Sprintf("cm-%d", n), errors.New("the object has been modified"))
}

// script is a fn that returns its errors in order and then repeats the last.
type script struct {
	errs  []error
	calls int
}

func (s *script) fn() error {
	err := s.errs[min(s.calls, len(s.errs)-1)]
	s.calls++
	return err
}

func (s *script) ctxFn(context.Context) error { return s.fn() }

func conflicts(n int) *script {
	s := &script{}
	for i := range n {
		s.errs = append(s.errs, conflict(i+1))
	}
	return s
}

var sink error

// valueScript is a value-returning fn: attempt i returns (i, errs[i-1]),
// repeating the last error.
func (s *script) valueFn(context.Context) (int, error) {
	err := s.fn()
	return s.calls, err
}

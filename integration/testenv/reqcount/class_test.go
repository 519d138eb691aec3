package reqcount_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// timeoutErr is an error that says it is a timeout, as net/http's are.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "net/http: timeout awaiting response headers" }
func (timeoutErr) Timeout() bool { return true }

func TestErrClass(t *testing.T) {
	t.Parallel()
	cms := schema.GroupResource{Resource: "configmaps"}
	onWire := func(op string, errno syscall.Errno) error {
		return &url.Error{Op: "Put", URL: "https://127.0.0.1:6443/api/v1/namespaces/ns/configmaps/c",
			Err: &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}}
	}
	tests := []struct {
		err  error
		want reqcount.Class
	}{
		{nil, reqcount.None},
		{apierrors.NewConflict(cms, "c", errors.New("the object has been modified")), reqcount.Conflict},
		{fmt.Errorf("update: %w", apierrors.NewConflict(cms, "c", errors.New("modified"))), reqcount.Conflict},
		// A 409 that is not a Conflict.
		{apierrors.NewAlreadyExists(cms, "c"), reqcount.Other},
		{apierrors.NewTooManyRequests("slow down", 1), reqcount.ServerError},
		{apierrors.NewInternalError(errors.New("boom")), reqcount.ServerError},
		{apierrors.NewServiceUnavailable("down"), reqcount.ServerError},
		{apierrors.NewNotFound(cms, "c"), reqcount.Other},
		{onWire("dial", syscall.ECONNREFUSED), reqcount.Refused},
		{onWire("read", syscall.ECONNRESET), reqcount.Reset},
		{onWire("write", syscall.EPIPE), reqcount.Reset},
		{&url.Error{Op: "Get", URL: "u", Err: timeoutErr{}}, reqcount.Timeout},
		{context.DeadlineExceeded, reqcount.Timeout},
		{errors.New("http2: client connection lost"), reqcount.HTTP2Lost},
		{errors.New("http2: client connection force closed via ClientConn.Close"), reqcount.HTTP2Closed},
		{errors.New("http2: client conn could not be established"), reqcount.HTTP2Closed},
		{errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), reqcount.HTTP2Closed},
		{&url.Error{Op: "Get", URL: "u", Err: io.EOF}, reqcount.EOF},
		{io.ErrUnexpectedEOF, reqcount.EOF},
		{errors.New("something else"), reqcount.Other},
	}
	for _, tc := range tests {
		if got := reqcount.ErrClass(tc.err); got != tc.want {
			t.Errorf("ErrClass(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestClasses checks that Classes lists every class but None once, each
// with a name of its own.
func TestClasses(t *testing.T) {
	t.Parallel()
	cs := reqcount.Classes()
	if len(cs) != int(reqcount.Other) || cs[0] != reqcount.Conflict || cs[len(cs)-1] != reqcount.Other {
		t.Fatalf("Classes() = %v, want Conflict through Other", cs)
	}
	names := map[string]bool{reqcount.None.String(): true}
	for _, c := range cs {
		if n := c.String(); n == "" || names[n] {
			t.Errorf("class %d is named %q, empty or taken", int(c), n)
		}
		names[c.String()] = true
	}
	if got, want := reqcount.Class(42).String(), "Class(42)"; got != want {
		t.Errorf("an unknown class is named %q, want %q", got, want)
	}
}

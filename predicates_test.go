package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// refusedErr dials a loopback port that nobody listens on.
func refusedErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = http.Get("http://" + addr + "/")
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)
	return err
}

// resetErr sends a request to a server that reads it and then resets the
// connection (SO_LINGER 0, then close), as an apiserver's peer does when a
// proxy or load balancer drops it.
func resetErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 4096)) // the request has been sent
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, err = client.Post("http://"+l.Addr().String()+"/", "text/plain", nil)
	<-served
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.ECONNRESET, "%v", err)
	return err
}

// brokenPipeErr writes to a connection that the peer closed until the
// write fails: the first write draws the peer's reset, the next one EPIPE.
func brokenPipeErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	peer, err := l.Accept()
	require.NoError(t, err)
	require.NoError(t, peer.Close())
	for range 10000 { // a few milliseconds at most
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	require.ErrorIs(t, err, syscall.EPIPE)
	return &url.Error{Op: "Put", URL: "https://127.0.0.1", Err: err}
}

// timeoutErr calls a server that never answers with a client whose timeout
// ends the call.
func timeoutErr(t *testing.T, client *http.Client) error {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	_, err := client.Get(srv.URL)
	require.Error(t, err)
	var netErr net.Error
	require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "%v", err)
	return err
}

// ctxErr calls a server under a context that is done already.
func ctxErr(t *testing.T, deadline bool) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	if deadline {
		ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	}
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	var uerr *url.Error
	require.ErrorAs(t, err, &uerr)
	return err
}

// deadlineErr returns a read deadline's timeout on a real connection.
func deadlineErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	return err
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		err  func(t *testing.T) error
		want bool
	}{
		{"nil", func(*testing.T) error { return nil }, false},
		{"plain error", func(*testing.T) error { return errors.New("boom") }, false},

		{"429 Too Many Requests", func(*testing.T) error { return apierrors.NewTooManyRequests("slow down", 1) }, true},
		{"429 without Retry-After", func(*testing.T) error { return apierrors.NewTooManyRequests("slow down", 0) }, true},
		{"500 Internal", func(*testing.T) error { return apierrors.NewInternalError(errors.New("etcd")) }, true},
		{"500 ServerTimeout", func(*testing.T) error { return apierrors.NewServerTimeout(gr, "update", 0) }, true},
		{"501 Not Implemented", func(*testing.T) error {
			return apierrors.NewGenericServerResponse(501, "patch", gr, "cm", "", 0, false)
		}, false},
		{"502 Bad Gateway", func(*testing.T) error { return apierrors.NewGenericServerResponse(502, "get", gr, "cm", "", 0, false) }, true},
		{"503 Service Unavailable", func(*testing.T) error { return apierrors.NewServiceUnavailable("shutting down") }, true},
		{"504 Gateway Timeout", func(*testing.T) error { return apierrors.NewTimeoutError("slow etcd", 1) }, true},
		{"wrapped 503", func(*testing.T) error { return fmt.Errorf("sync: %w", apierrors.NewServiceUnavailable("down")) }, true},
		{"409 Conflict", func(*testing.T) error { return conflict(1) }, false},
		{"wrapped 409 Conflict", func(*testing.T) error { return fmt.Errorf("sync: %w", conflict(1)) }, false},
		// The fourth revision: the quota admission's own race is transient.
		{"409 Conflict on resourcequotas", func(*testing.T) error { return quotaConflict() }, true},
		{"wrapped 409 Conflict on resourcequotas", func(*testing.T) error { return fmt.Errorf("create: %w", quotaConflict()) }, true},
		{"409 without a reason on resourcequotas", func(*testing.T) error {
			return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 409,
				Details: &metav1.StatusDetails{Kind: "resourcequotas", Name: "q"}}}
		}, true},
		{"409 Conflict on resourcequotas of another group", func(*testing.T) error {
			return apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "resourcequotas"}, "q", errors.New("modified"))
		}, false},
		{"409 AlreadyExists on resourcequotas", func(*testing.T) error {
			return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "resourcequotas"}, "q")
		}, false},
		{"404 Not Found", func(*testing.T) error { return apierrors.NewNotFound(gr, "cm") }, false},
		{"403 Forbidden", func(*testing.T) error { return apierrors.NewForbidden(gr, "cm", errors.New("no")) }, false},
		{"422 Invalid", func(*testing.T) error { return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "cm", nil) }, false},
		{"410 Gone", func(*testing.T) error { return apierrors.NewResourceExpired("too old") }, false},

		{"connection refused", refusedErr, true},
		{"connection reset", resetErr, true},
		{"broken pipe", brokenPipeErr, true},
		{"io.EOF in a url.Error", func(*testing.T) error { return &url.Error{Op: "Put", URL: "https://127.0.0.1", Err: io.EOF} }, true},
		{"io.ErrUnexpectedEOF in a url.Error", func(*testing.T) error {
			return &url.Error{Op: "Put", URL: "https://127.0.0.1", Err: io.ErrUnexpectedEOF}
		}, true},
		{"http2 connection lost", func(*testing.T) error {
			return &url.Error{Op: "Put", URL: "https://127.0.0.1", Err: errors.New("http2: client connection lost")}
		}, true},
		{"http2 connection force closed", func(*testing.T) error {
			// net/http's error for the other streams of a connection it closes
			// after a write failed (h2_bundle.go, errClientConnForceClosed).
			return &url.Error{Op: "Put", URL: "https://127.0.0.1", Err: errors.New("http2: client connection force closed via ClientConn.Close")}
		}, true},
		{"http2 connection not established", func(*testing.T) error {
			return &url.Error{Op: "Get", URL: "https://127.0.0.1", Err: errors.New("http2: client conn could not be established")}
		}, true},
		{"http2 graceful GOAWAY", func(*testing.T) error {
			return &url.Error{Op: "Get", URL: "https://127.0.0.1", Err: errors.New("http2: Transport received Server's graceful shutdown GOAWAY")}
		}, true},
		{"http.Client timeout", func(t *testing.T) error {
			return timeoutErr(t, &http.Client{Timeout: 5 * time.Millisecond})
		}, true},
		{"transport ResponseHeaderTimeout", func(t *testing.T) error {
			return timeoutErr(t, &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 5 * time.Millisecond}})
		}, true},
		{"read deadline", deadlineErr, true},

		{"context.Canceled", func(*testing.T) error { return context.Canceled }, false},
		{"context.DeadlineExceeded", func(*testing.T) error { return context.DeadlineExceeded }, false},
		{"canceled request in a url.Error", func(t *testing.T) error { return ctxErr(t, false) }, false},
		{"deadline of the request in a url.Error", func(t *testing.T) error { return ctxErr(t, true) }, false},
		{"wrapped context error", func(*testing.T) error { return fmt.Errorf("get: %w", context.DeadlineExceeded) }, false},
		{"joined with a context error", func(*testing.T) error { return errors.Join(io.EOF, context.DeadlineExceeded) }, false},
		{"a loop ended by its context", func(*testing.T) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return retry.OnErrorWithContext(ctx, retry.DefaultRetry, retry.IsTransient, func(context.Context) error { return nil })
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.err(t)
			assert.Equal(t, tt.want, retry.IsTransient(err), "%T: %v", err, err)
		})
	}
}

// applyConflict is the error the API server returns for a Server-Side Apply
// that sets a field another manager owns.
func applyConflict() error {
	return apierrors.NewApplyConflict([]metav1.StatusCause{{
		Type:    metav1.CauseTypeFieldManagerConflict,
		Message: `conflict with "manager-a": .data.key`,
		Field:   ".data.key",
	}}, `Apply failed with 1 conflict: conflict with "manager-a": .data.key`)
}

func TestIsApplyConflict(t *testing.T) {
	t.Parallel()
	staleWithCause := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid}}},
	}}
	invalidWithCause := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict}}},
	}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"apply conflict", applyConflict(), true},
		{"wrapped", fmt.Errorf("apply: %w", applyConflict()), true},
		{"joined, first", errors.Join(applyConflict(), conflict(1)), true},
		{"joined, after another API error", errors.Join(conflict(1), applyConflict()), false},
		{"stale resourceVersion", conflict(1), false},
		{"conflict with another cause", staleWithCause, false},
		{"cause without reason Conflict", invalidWithCause, false},
		{"not an API error", errors.New("conflict"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, retry.IsApplyConflict(tc.err))
			if tc.want {
				assert.True(t, apierrors.IsConflict(tc.err), "apierrors.IsConflict is true too")
				assert.False(t, retry.IsTransient(tc.err))
			}
		})
	}
}

func TestApplyConflictNotRetriedUnlikeClientGo(t *testing.T) {
	t.Parallel()
	b := retry.DefaultRetry
	applyErr := applyConflict()
	apply := func(calls *int) func() error {
		return func() error { *calls++; return applyErr }
	}

	var clientGo int
	wantClientGo := clientGoOnError(wait.Backoff(retry.Backoff{Steps: b.Steps}), apierrors.IsConflict, apply(&clientGo))
	assert.Equal(t, b.Steps, clientGo, "client-go's RetryOnConflict sends the losing apply Steps times")
	assert.Same(t, applyErr, wantClientGo)

	var plain, withCtx int
	var rec fakeSleeper
	err := retry.RetryOnConflict(b, apply(&plain), retry.WithSleeper(&rec))
	assert.Same(t, applyErr, err, "returned as it is")
	assert.Equal(t, 1, plain, "RetryOnConflict sends it once")
	err = retry.RetryOnConflictWithContext(context.Background(), b, func(context.Context) error { return apply(&withCtx)() }, retry.WithSleeper(&rec))
	assert.Same(t, applyErr, err)
	assert.Equal(t, 1, withCtx, "RetryOnConflictWithContext sends it once")
	assert.Empty(t, rec.waits)

	c := newCalls()
	update := func(context.Context, *Counter) (*Counter, error) {
		c.log = append(c.log, "update")
		return nil, applyErr
	}
	_, err = retry.UpdateOnConflict(context.Background(), b, nil, c.get, c.claim("a"), update, retry.WithSleeper(&fakeSleeper{log: &c.log}))
	assert.Same(t, applyErr, err)
	assert.Equal(t, []string{"get", "mutate", "update"}, c.log, "UpdateOnConflict does not retry it")
}

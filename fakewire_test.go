package retry_test

// The fake wire: every http.RoundTripper the tests put below a Budget's
// WrapTransport (or an example's client), the requests they send through
// it, and the errors a wire gives.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// wireReply is one answer of a wire: a status with an optional Retry-After,
// or an error.
type wireReply struct {
	status     int
	retryAfter string
	err        error
}

// wire is a fake RoundTripper below the budget: it answers each request
// with the next reply (the last one repeats) and records what reached it.
type wire struct {
	mu      sync.Mutex
	replies []wireReply
	sent    []string // "METHOD URL"
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, req.Method+" "+req.URL.String())
	r := wireReply{status: http.StatusOK}
	if len(w.replies) > 0 {
		r = w.replies[0]
		if len(w.replies) > 1 {
			w.replies = w.replies[1:]
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	resp := &http.Response{StatusCode: r.status, Header: http.Header{}, Body: http.NoBody, Request: req}
	if r.retryAfter != "" {
		resp.Header.Set("Retry-After", r.retryAfter)
	}
	return resp, nil
}

// requests returns how many requests reached w.
func (w *wire) requests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sent)
}

// answer makes replies w's next answers.
func (w *wire) answer(replies ...wireReply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replies = replies
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// paths is a wire that answers by path: the status of the first entry of
// failing whose key the path contains (an error for status 0), else 200;
// for failing methods only when methods is set. It records what reached
// it.
type paths struct {
	mu      sync.Mutex
	failing map[string]wireReply
	methods map[string]bool // nil: every method fails
	sent    []string
}

func (p *paths) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.sent = append(p.sent, req.Method+" "+req.URL.Path)
	reply := wireReply{status: http.StatusOK}
	for key, r := range p.failing {
		if strings.Contains(req.URL.Path, key) && (p.methods == nil || p.methods[req.Method]) {
			reply = r
		}
	}
	p.mu.Unlock()
	return (&wire{replies: []wireReply{reply}}).RoundTrip(req)
}

// count returns how many requests whose "METHOD PATH" contains key
// reached p.
func (p *paths) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sent {
		if strings.Contains(s, key) {
			n++
		}
	}
	return n
}

// okResponse is the answer of benchWire.
var okResponse = &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}

// benchWire answers every request at once, allocating nothing.
var benchWire = roundTripFunc(func(*http.Request) (*http.Response, error) { return okResponse, nil })

// The URLs the tests send to, on one server.
const (
	server        = "https://apiserver.example"
	apiURL        = server + "/api/v1/namespaces/default/configmaps/cm"
	watchURL      = server + "/api/v1/namespaces/default/configmaps?resourceVersion=7&watch=true"
	leaseURL      = server + "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/controller"
	metricsURL    = server + "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"
	discoveryURL  = server + "/apis/metrics.k8s.io/v1beta1"
	secretURL     = server + "/api/v1/namespaces/default/secrets/s"
	deploymentURL = server + "/apis/apps/v1/namespaces/default/deployments/d"
)

// The errors a wire gives when no response comes.
var (
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errH2Lost  = errors.New("http2: client connection lost")
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
)

// request builds a request as client-go does: a body of bytes (whose
// GetBody net/http sets) for the verbs that carry one.
func request(t testing.TB, ctx context.Context, method, url string) *http.Request {
	t.Helper()
	var body io.Reader
	if method != http.MethodGet {
		body = bytes.NewReader([]byte(`{"kind":"ConfigMap"}`))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// roundTrip sends a request through rt, closing the response's body.
func roundTrip(t testing.TB, rt http.RoundTripper, method, url string) error {
	t.Helper()
	resp, err := rt.RoundTrip(request(t, context.Background(), method, url))
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// timeout is a net.Error that timed out, as a transport's
// ResponseHeaderTimeout gives.
type timeout struct{}

func (timeout) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeout) Timeout() bool   { return true }
func (timeout) Temporary() bool { return true }

// replies is an http.RoundTripper that answers from a list, standing in for
// a server; nothing goes on the network.
type replies []*http.Response

func (r *replies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := (*r)[0]
	*r = (*r)[1:]
	resp.Request = req
	resp.Body = io.NopCloser(strings.NewReader(""))
	return resp, nil
}

// reply is an answer for replies: code, with a Retry-After when given.
func reply(code int, retryAfter string) *http.Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &http.Response{StatusCode: code, Status: fmt.Sprint(code, " ", http.StatusText(code)), Header: h}
}

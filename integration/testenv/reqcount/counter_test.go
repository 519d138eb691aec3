package reqcount_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// client returns a client whose requests go through c to srv, on a
// transport of its own.
func client(t *testing.T, c *reqcount.Counter, srv *httptest.Server, headerTimeout time.Duration) *http.Client {
	t.Helper()
	tr := &http.Transport{ResponseHeaderTimeout: headerTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	hc, err := rest.HTTPClientFor(c.Config(&rest.Config{Host: srv.URL, Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// send sends a request of method to url through hc and returns the
// round trip's error.
func send(t *testing.T, hc *http.Client, method, url string) error {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestCounter sends requests through a counted rest.Config to a local
// server and checks what was counted, failed requests included.
func TestCounter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
	}))
	defer srv.Close()

	var c reqcount.Counter
	hc := client(t, &c, srv, 0)
	sendOK := func(method, path string) {
		if err := send(t, hc, method, srv.URL+path); err != nil {
			t.Fatal(err)
		}
	}
	sendOK("GET", "/api/v1/namespaces/ns/configmaps/c")
	before := c.Snapshot()
	sendOK("PUT", "/api/v1/namespaces/ns/configmaps/c")
	sendOK("PUT", "/api/v1/namespaces/ns/configmaps/c")
	sendOK("GET", "/api/v1/namespaces/ns/configmaps/c")

	get, update := reqcount.Key{Verb: "get", Resource: "configmaps"}, reqcount.Key{Verb: "update", Resource: "configmaps"}
	got := c.Snapshot().Sub(before)
	want := reqcount.Counts{update: 2, get: 1}
	if len(got) != len(want) || got[update] != 2 || got[get] != 1 {
		t.Errorf("counted %v, want %v", got, want)
	}
	if n := got.Resource("configmaps"); n != 3 {
		t.Errorf("%d configmaps requests, want 3", n)
	}
	if n := c.Snapshot()[get]; n != 2 {
		t.Errorf("%d gets in all, want 2", n)
	}
	if got := c.Requests(); got != nil {
		t.Errorf("Requests() = %v without KeepRequests, want nil", got)
	}
}

// TestCounterOutcomes checks the responses a Counter records: by status
// code and class, each request with its timing, and OnDone's view.
func TestCounterOutcomes(t *testing.T) {
	t.Parallel()
	// The last path element is the status code to answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		if err != nil {
			code = http.StatusBadRequest
		}
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()

	var mu sync.Mutex
	var seen []reqcount.Request
	c := &reqcount.Counter{KeepRequests: true, OnDone: func(r reqcount.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	}}
	hc := client(t, c, srv, 0)
	const cm = "/api/v1/namespaces/ns/configmaps/"
	sends := []struct {
		method, code string
		class        reqcount.Class
	}{
		{"POST", "", reqcount.None}, // create: the path ends in "configmaps/", 400
		{"PUT", "409", reqcount.Conflict},
		{"PUT", "200", reqcount.None},
		{"PUT", "429", reqcount.ServerError},
		{"GET", "404", reqcount.None},
		{"GET", "503", reqcount.ServerError},
	}
	start := time.Now()
	for _, s := range sends {
		if err := send(t, hc, s.method, srv.URL+cm+s.code); err != nil {
			t.Fatal(err)
		}
	}

	o := c.Outcomes()
	for _, tc := range []struct {
		verb string
		code int
		want int
	}{
		{"update", reqcount.AnyCode, 3},
		{"update", 409, 1},
		{"update", 429, 1},
		{"update", 201, 0},
		{"get", reqcount.AnyCode, 2},
		{"get", 404, 1},
		{"create", 400, 1},
		{"create", 0, 0},
	} {
		if n := o.Status(tc.verb, "configmaps", tc.code); n != tc.want {
			t.Errorf("Status(%s, configmaps, %d) = %d, want %d", tc.verb, tc.code, n, tc.want)
		}
	}
	if n := o.Failed(reqcount.Conflict); n != 1 {
		t.Errorf("Failed(Conflict) = %d, want 1", n)
	}
	if n := o.Failed(reqcount.ServerError, reqcount.Conflict); n != 3 {
		t.Errorf("Failed(ServerError, Conflict) = %d, want 3", n)
	}
	if n := o.Count(func(o reqcount.Outcome) bool { return o.Written }); n != len(sends) {
		t.Errorf("%d requests written, want all %d", n, len(sends))
	}
	wantString := "create configmaps 400: 1, get configmaps 404: 1, get configmaps 503: 1, update configmaps 200: 1, update configmaps 409: 1, update configmaps 429: 1"
	if got := o.String(); got != wantString {
		t.Errorf("String() = %q, want %q", got, wantString)
	}

	reqs := c.Requests()
	if len(reqs) != len(sends) {
		t.Fatalf("%d requests kept, want %d", len(reqs), len(sends))
	}
	for i, r := range reqs {
		s := sends[i]
		code, _ := strconv.Atoi(s.code)
		if s.code == "" {
			code = http.StatusBadRequest
		}
		if r.Code != code || r.Class != s.class || r.Err != nil {
			t.Errorf("request %d: %d, %s, %v; want %d, %s, no error", i, r.Code, r.Class, r.Err, code, s.class)
		}
		if wantRA := map[bool]string{true: "1"}[code == 429]; r.RetryAfter != wantRA {
			t.Errorf("request %d: Retry-After %q, want %q", i, r.RetryAfter, wantRA)
		}
		if r.Start.Before(start) || r.Wrote.Before(r.Start) || r.FirstByte.Before(r.Wrote) || r.End.Before(r.FirstByte) {
			t.Errorf("request %d: start %v, wrote %v, first byte %v, end %v: want each at or after the one before",
				i, r.Start, r.Wrote, r.FirstByte, r.End)
		}
		if i > 0 && r.Start.Before(reqs[i-1].End) {
			t.Errorf("request %d started before request %d ended", i, i-1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(reqs) {
		t.Fatalf("OnDone saw %d requests, want %d", len(seen), len(reqs))
	}
	for i := range seen {
		if seen[i] != reqs[i] {
			t.Errorf("OnDone saw %+v, Requests has %+v", seen[i], reqs[i])
		}
	}
	if c.InFlight() != 0 || len(c.Pending()) != 0 {
		t.Errorf("%d in flight (%v) after every request ended, want 0", c.InFlight(), c.Pending())
	}
}

// roundTripperFunc is a transport that is a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestCounterErrors checks how a Counter records round trips that fail:
// counted as sent, with no status code, by class, the first error of
// each class kept.
func TestCounterErrors(t *testing.T) {
	t.Parallel()
	reset := func(n int) error {
		return &url.Error{Op: "Get", URL: strconv.Itoa(n), Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	}
	errs := []error{reset(1), errors.New("boom"), reset(2), context.DeadlineExceeded}
	next := 0
	var c reqcount.Counter
	rt := c.Wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		next++
		return nil, errs[next-1]
	}))
	for range errs {
		req := httptest.NewRequest("GET", "/api/v1/namespaces/ns/configmaps/c", nil)
		if _, err := rt.RoundTrip(req); err == nil {
			t.Fatal("a failing round trip returned no error")
		}
	}
	get := reqcount.Key{Verb: "get", Resource: "configmaps"}
	if n := c.Snapshot()[get]; n != len(errs) {
		t.Errorf("%d gets counted as sent, want %d", n, len(errs))
	}
	o := c.Outcomes()
	if n := o.Status("get", "configmaps", 0); n != len(errs) {
		t.Errorf("%d gets ended without a response, want %d", n, len(errs))
	}
	for class, want := range map[reqcount.Class]int{reqcount.Reset: 2, reqcount.Other: 1, reqcount.Timeout: 1, reqcount.Refused: 0} {
		if n := o.Failed(class); n != want {
			t.Errorf("Failed(%s) = %d, want %d", class, n, want)
		}
	}
	if n := o.Count(func(o reqcount.Outcome) bool { return o.Written }); n != 0 {
		t.Errorf("%d requests written by a transport that wrote none", n)
	}
	for class, want := range map[reqcount.Class]error{reqcount.Reset: errs[0], reqcount.Other: errs[1], reqcount.Timeout: errs[3], reqcount.Refused: nil, reqcount.Class(99): nil} {
		if got := c.FirstErr(class); got != want {
			t.Errorf("FirstErr(%s) = %v, want %v", class, got, want)
		}
	}
}

// TestCounterRefused sends a request to a port that nothing listens on:
// refused, and never written.
func TestCounterRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &reqcount.Counter{KeepRequests: true}
	hc := &http.Client{Transport: c.Wrap(&http.Transport{})}
	if err := send(t, hc, "PUT", "http://"+addr+"/api/v1/namespaces/ns/configmaps/c"); err == nil {
		t.Fatal("a request to a closed port returned no error")
	}
	reqs := c.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests kept, want 1", len(reqs))
	}
	if r := reqs[0]; r.Class != reqcount.Refused || r.Code != 0 || !r.Wrote.IsZero() || r.Err == nil || c.FirstErr(reqcount.Refused) != r.Err {
		t.Errorf("request %+v: want refused, unwritten, with its error kept", r)
	}
}

// TestCounterInFlight holds a request at the server and checks that the
// Counter shows it in flight, written and awaiting its response headers;
// and that a request that times out awaiting them is recorded as
// written.
func TestCounterInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			<-release
		}
	}))
	defer srv.Close()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()

	var c reqcount.Counter
	target := srv.URL + "/api/v1/namespaces/ns/configmaps/c"
	hc := client(t, &c, srv, 0)
	req, err := http.NewRequest("PUT", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	err = poll.Until(t.Context(), time.Millisecond, 10*time.Second, func() bool {
		p := c.Pending()
		return len(p) == 1 && !p[0].Wrote.IsZero()
	})
	if err != nil {
		t.Fatalf("the held request was not shown written: %v; pending %+v", err, c.Pending())
	}
	p := c.Pending()
	if n := c.InFlight(); n != 1 || p[0].Verb != "update" || !p[0].FirstByte.IsZero() || !p[0].End.IsZero() {
		t.Errorf("%d in flight, pending %+v: want the update, awaiting its response", n, p)
	}
	// A GET goes through meanwhile.
	if err := send(t, hc, "GET", target); err != nil {
		t.Fatal(err)
	}
	if n := c.InFlight(); n != 1 {
		t.Errorf("%d in flight after the GET, want the held update alone", n)
	}
	// A second PUT times out awaiting its headers: written, no answer.
	if err := send(t, client(t, &c, srv, 5*time.Millisecond), "PUT", target); err == nil {
		t.Error("a PUT with a 5ms header timeout got through the held server")
	}
	timedOut := c.Outcomes().Count(func(o reqcount.Outcome) bool {
		return o.Verb == "update" && o.Class == reqcount.Timeout && o.Written && o.Code == 0
	})
	if timedOut != 1 {
		t.Errorf("outcomes %v: want 1 written update that timed out", c.Outcomes())
	}

	unblock()
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	if n, p := c.InFlight(), c.Pending(); n != 0 || len(p) != 0 {
		t.Errorf("%d in flight (%v) after every request ended, want 0", n, p)
	}
	if n := c.Outcomes().Status("update", "configmaps", http.StatusOK); n != 1 {
		t.Errorf("%d updates answered 200, want the held one", n)
	}
}

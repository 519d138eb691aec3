package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kuberetry/retry/integration/testenv/poll"
)

// echoServer answers each line with its name and the line, until the
// client closes. It stops when the test ends.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	addr, _ := countingEchoServer(t, name)
	return addr
}

// countingEchoServer is echoServer that also counts the connections it
// accepts.
func countingEchoServer(t *testing.T, name string) (string, *atomic.Int64) {
	t.Helper()
	accepted := new(atomic.Int64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+":"+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func newProxy(t *testing.T, backends ...string) *Proxy {
	t.Helper()
	p, err := New(backends...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and returns the answer, or the error, within 5s.
func (c *client) roundTrip(line string) (string, error) {
	if err := c.conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// tryOnce makes a new connection to addr and a round trip on it, and
// returns the error. On loopback a reset often arrives before connect
// returns, so the dial itself fails; otherwise the first read does.
func tryOnce(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	cl := &client{conn: c, r: bufio.NewReader(c)}
	_, err = cl.roundTrip("anyone?")
	return err
}

func TestForwardsAndSwitchesBackend(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	p := newProxy(t, a)
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("proxy listens on %s, want 127.0.0.1", p.Addr())
	}

	c1 := dial(t, p.Addr())
	if got, err := c1.roundTrip("hello"); err != nil || got != "a:hello" {
		t.Fatalf("through the proxy: %q, %v; want a:hello", got, err)
	}

	p.SetBackend(b)
	c2 := dial(t, p.Addr())
	if got, err := c2.roundTrip("hi"); err != nil || got != "b:hi" {
		t.Fatalf("a new connection after SetBackend: %q, %v; want b:hi", got, err)
	}
	// An open connection stays with the backend it was made to.
	if got, err := c1.roundTrip("again"); err != nil || got != "a:again" {
		t.Fatalf("the old connection after SetBackend: %q, %v; want a:again", got, err)
	}
	if s := p.Stats(); s.Accepted != 2 || s.DialErrors != 0 || s.Resets != 0 {
		t.Fatalf("stats %+v, want 2 accepted and nothing else", s)
	}
}

func TestResetAll(t *testing.T) {
	p := newProxy(t, echoServer(t, "a"))
	const n = 3
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = dial(t, p.Addr())
		// A round trip proves the proxy holds the connection open.
		if _, err := clients[i].roundTrip("x"); err != nil {
			t.Fatal(err)
		}
	}

	if got := p.Open(); got != n {
		t.Fatalf("Open is %d with %d clients connected", got, n)
	}
	if got := p.ResetAll(); got != n {
		t.Fatalf("ResetAll reset %d connections, want %d", got, n)
	}
	for i, c := range clients {
		_, err := c.roundTrip("after")
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("client %d after ResetAll: %v, want ECONNRESET", i, err)
		}
	}
	if got := p.ResetAll(); got != 0 {
		t.Errorf("a second ResetAll reset %d connections, want 0", got)
	}
	// The reset pairs leave the proxy's books once their pumps end.
	if err := poll.Until(context.Background(), time.Millisecond, 5*time.Second, func() bool { return p.Open() == 0 }); err != nil {
		t.Fatalf("Open is still %d 5s after ResetAll", p.Open())
	}
	if s := p.Stats(); s.ResetAlls != 1 || s.Resets != n {
		t.Errorf("stats %+v, want 1 ResetAll that reset %d connections", s, n)
	}

	// The proxy still serves new connections.
	if got, err := dial(t, p.Addr()).roundTrip("new"); err != nil || got != "a:new" {
		t.Fatalf("a new connection after ResetAll: %q, %v", got, err)
	}
}

func TestOutage(t *testing.T) {
	backend, accepted := countingEchoServer(t, "a")
	p := newProxy(t, backend)
	const n = 2
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = dial(t, p.Addr())
		if _, err := clients[i].roundTrip("x"); err != nil {
			t.Fatal(err)
		}
	}

	if got := p.SetOutage(true); got != n {
		t.Fatalf("SetOutage(true) reset %d open connections, want %d", got, n)
	}
	if got := p.SetOutage(true); got != 0 {
		t.Fatalf("SetOutage(true) during an outage reset %d connections, want 0", got)
	}
	for i, c := range clients {
		if _, err := c.roundTrip("after"); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("open client %d after the outage began: %v, want ECONNRESET", i, err)
		}
	}
	// New connections are reset at once and reach no backend. On loopback
	// the reset may arrive before connect returns, failing the dial.
	const tries = 3
	for i := range tries {
		if err := tryOnce(p.Addr()); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("new connection %d during the outage: %v, want ECONNRESET", i, err)
		}
	}
	if got := accepted.Load(); got != n {
		t.Errorf("the backend accepted %d connections, want only the %d made before the outage", got, n)
	}

	if got := p.SetOutage(false); got != 0 {
		t.Errorf("SetOutage(false) returned %d, want 0", got)
	}
	if got, err := dial(t, p.Addr()).roundTrip("back"); err != nil || got != "a:back" {
		t.Fatalf("a new connection after the outage: %q, %v", got, err)
	}
	s := p.Stats()
	if s.Outages != 1 || s.OutageResets != n || s.OutageRejects != tries || s.Accepted != n+tries+1 {
		t.Errorf("stats %+v, want 1 outage, %d open connections reset, %d rejected, %d accepted", s, n, tries, n+tries+1)
	}
	// An outage is not a ResetAll, nor a failed dial.
	if s.ResetAlls != 0 || s.Resets != 0 || s.DialErrors != 0 {
		t.Errorf("stats %+v, want no ResetAll and no dial error", s)
	}
}

func TestDelayHoldsResponses(t *testing.T) {
	p := newProxy(t, echoServer(t, "a"))
	c := dial(t, p.Addr())
	if _, err := c.roundTrip("warm"); err != nil {
		t.Fatal(err)
	}

	const delay = 400 * time.Millisecond
	start := time.Now()
	p.Delay(delay)
	if _, err := io.WriteString(c.conn, "held\n"); err != nil {
		t.Fatal(err)
	}
	// A reader with a shorter timeout than the delay times out ...
	if err := c.conn.SetReadDeadline(time.Now().Add(delay / 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during the delay: %v, want a timeout", err)
	}
	// ... and the answer arrives, intact, once the delay is over.
	if err := c.conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil || got != "a:held\n" {
		t.Fatalf("read after the delay: %q, %v", got, err)
	}
	if waited := time.Since(start); waited < delay {
		t.Errorf("answer after %v, before the delay of %v ended", waited, delay)
	}
	if s := p.Stats(); s.Delays != 1 || s.HeldChunks < 1 {
		t.Errorf("stats %+v, want 1 Delay and at least 1 held chunk", s)
	}

	// After the delay, answers are prompt again.
	start = time.Now()
	if _, err := c.roundTrip("quick"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= delay {
		t.Errorf("a round trip after the delay took %v", took)
	}
}

func TestDeadBackendResetsClient(t *testing.T) {
	// A port that was just free, now closed: dials to it are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	p := newProxy(t, dead)
	if err := tryOnce(p.Addr()); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("through a proxy whose backend is down: %v, want ECONNRESET", err)
	}
	if s := p.Stats(); s.DialErrors != 1 {
		t.Fatalf("stats %+v, want 1 dial error", s)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := New(echoServer(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if _, err := c.roundTrip("x"); err != nil {
		t.Fatal(err)
	}
	p.Delay(time.Hour) // Close must not wait for it
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
	if _, err := c.roundTrip("after close"); err == nil {
		t.Fatal("a round trip through a closed proxy succeeded")
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("a closed proxy still accepts connections")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// names returns the names of the echo servers that answer n new
// connections through p, one round trip each, in order.
func names(t *testing.T, p *Proxy, n int) []string {
	t.Helper()
	var got []string
	for range n {
		s, err := dial(t, p.Addr()).roundTrip("x")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSuffix(s, ":x"))
	}
	return got
}

func TestBalancerRoundRobin(t *testing.T) {
	a, b, c := echoServer(t, "a"), echoServer(t, "b"), echoServer(t, "c")
	p := newProxy(t, a, b, a) // a backend named twice is in the rotation once
	if got := p.Backends(); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("Backends %v, want [%s %s]", got, a, b)
	}
	if got := names(t, p, 4); !slices.Equal(got, []string{"a", "b", "a", "b"}) {
		t.Fatalf("4 connections went to %v, want a b a b", got)
	}

	p.AddBackend(c)
	p.AddBackend(c)
	if got := names(t, p, 3); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after AddBackend, 3 connections went to %v, want a b c", got)
	}
	s := p.Stats()
	if want := map[string]int64{a: 3, b: 3, c: 1}; !maps.Equal(s.Routed, want) {
		t.Errorf("Routed %v, want %v", s.Routed, want)
	}
	if s.Accepted != 7 || s.DialErrors != 0 || s.Removals != 0 {
		t.Errorf("stats %+v, want 7 accepted and nothing else", s)
	}
}

func TestBalancerRemoveBackend(t *testing.T) {
	a, b, c := echoServer(t, "a"), echoServer(t, "b"), echoServer(t, "c")
	p := newProxy(t, a, b, c)
	clients := make([]*client, 6) // two on each backend: a b c a b c
	for i := range clients {
		clients[i] = dial(t, p.Addr())
		if _, err := clients[i].roundTrip("x"); err != nil {
			t.Fatal(err)
		}
	}

	// The turn is a's now; b leaves, and it stays a's.
	if got := p.RemoveBackend(b); got != 2 {
		t.Fatalf("RemoveBackend(b) reset %d connections, want b's 2", got)
	}
	for i, cl := range clients {
		_, err := cl.roundTrip("after")
		if i%3 == 1 {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("client %d of b after RemoveBackend(b): %v, want ECONNRESET", i, err)
			}
		} else if err != nil {
			t.Errorf("client %d of another backend after RemoveBackend(b): %v", i, err)
		}
	}
	if got := names(t, p, 4); !slices.Equal(got, []string{"a", "c", "a", "c"}) {
		t.Fatalf("after RemoveBackend(b), 4 connections went to %v, want a c a c", got)
	}
	if got := p.RemoveBackend(b); got != 0 {
		t.Errorf("a second RemoveBackend(b) reset %d connections", got)
	}

	// A replacement goes in last; the rotation goes on from a.
	d := echoServer(t, "d")
	p.AddBackend(d)
	if got := names(t, p, 3); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("after AddBackend(d), 3 connections went to %v, want a c d", got)
	}
	s := p.Stats()
	if s.Removals != 1 || s.RemovalResets != 2 || s.ResetAlls != 0 || s.DialErrors != 0 {
		t.Errorf("stats %+v, want 1 removal that reset 2 connections, nothing else", s)
	}
}

func TestBalancerEmptyRotation(t *testing.T) {
	if _, err := New(); err == nil {
		t.Fatal("New with no backend returned no error")
	}
	a, accepted := countingEchoServer(t, "a")
	p := newProxy(t, a)
	p.RemoveBackend(a)
	if err := tryOnce(p.Addr()); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("through a proxy with no backend: %v, want ECONNRESET", err)
	}
	if s := p.Stats(); s.NoBackend != 1 || s.DialErrors != 0 || accepted.Load() != 0 {
		t.Errorf("stats %+v, backend accepted %d: want 1 connection reset for want of a backend", s, accepted.Load())
	}
	p.AddBackend(a)
	if got := names(t, p, 1); got[0] != "a" {
		t.Fatalf("after AddBackend, a connection went to %v", got)
	}
}

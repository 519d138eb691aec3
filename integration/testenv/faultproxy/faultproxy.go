// Package faultproxy is a TCP proxy on loopback that injects the faults a
// client of the Kubernetes API server meets on a bad day: every open
// connection reset at once, responses held back past the client's timeout,
// a backend that goes away and comes back at another address (an
// apiserver restarted behind a fixed address), and an outage during which
// no connection gets through at all. Given several backends it is the
// round-robin load balancer in front of an HA control plane's apiservers,
// from whose rotation a backend can be taken, its connections reset, and
// into which a new one can be put. It forwards bytes and knows nothing of
// TLS or HTTP, so the client's TLS session runs end to end with the server
// behind it.
package faultproxy

import (
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what a Proxy did.
type Stats struct {
	// Accepted is the number of client connections accepted.
	Accepted int64
	// DialErrors is the number of accepted connections whose backend could
	// not be dialed; each was reset.
	DialErrors int64
	// ResetAlls is the number of ResetAll calls that found connections to
	// reset, and Resets the number of connections they reset.
	ResetAlls, Resets int64
	// Delays is the number of Delay calls, and HeldChunks the number of
	// reads from a backend whose forwarding a delay held back.
	Delays, HeldChunks int64
	// HeldFirst is the number of HeldChunks that were the first bytes
	// from the backend on their connection: with TLS, the server's half
	// of the handshake. A client waits for those in its dial, where a
	// response-header timeout does not run.
	HeldFirst int64
	// Outages is the number of outages started (SetOutage(true) while
	// none lasted), OutageResets the number of open connections their
	// start reset, and OutageRejects the number of connections accepted
	// during an outage, each reset at once without reaching a backend.
	Outages, OutageResets, OutageRejects int64
	// Removals is the number of RemoveBackend calls that took a backend
	// out of rotation, and RemovalResets the number of its connections
	// they reset. NoBackend is the number of connections accepted while
	// the rotation was empty, each reset at once.
	Removals, RemovalResets, NoBackend int64
	// Routed is the number of connections forwarded to each backend
	// (host:port), those whose dial failed included.
	Routed map[string]int64
}

// Proxy forwards each connection accepted on its loopback address to a
// backend address of its rotation, taking them in turn. Its methods are
// safe for concurrent use.
type Proxy struct {
	ln net.Listener

	mu        sync.Mutex
	backends  []string // the rotation
	next      int      // the rotation's backend for the next connection
	routed    map[string]int64
	conns     map[*pair]struct{}
	holdUntil time.Time     // the backends' bytes wait until then
	released  chan struct{} // closed by Release, to wake the holds
	outage    bool          // new connections are reset at once
	closed    bool

	wg sync.WaitGroup

	accepted, dialErrors, resetAlls, resets, delays, heldChunks, heldFirst atomic.Int64
	outages, outageResets, outageRejects                                   atomic.Int64
	removals, removalResets, noBackend                                     atomic.Int64
}

// pair is one proxied connection: the client's side and the backend's.
type pair struct {
	addr            string // the backend's address, as in the rotation
	client, backend *net.TCPConn
	once            sync.Once
	done            chan struct{} // closed when the pair is closed
	forwarded       bool          // the backend's bytes have reached the client; only its pump uses it
}

// New starts a proxy on 127.0.0.1, on a port the kernel picks, that
// forwards to backends (host:port), in turn, one connection each: the
// first connection to the first, the next to the second, and so on round.
// Close stops it.
func New(backends ...string) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("faultproxy: New needs a backend")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		ln:       ln,
		routed:   make(map[string]int64),
		conns:    make(map[*pair]struct{}),
		released: make(chan struct{}),
	}
	for _, b := range backends {
		p.AddBackend(b)
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetBackend makes new connections go to backend alone: it is the whole
// rotation. Open connections stay with the backend they were made to.
func (p *Proxy) SetBackend(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends, p.next = []string{backend}, 0
}

// AddBackend puts backend into the rotation, last, unless it is in it
// already. Open connections stay where they are, as with a load balancer:
// only new ones reach it.
func (p *Proxy) AddBackend(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.backends, backend) {
		p.backends = append(p.backends, backend)
	}
}

// RemoveBackend takes backend out of the rotation, so no new connection
// goes to it, and resets its open connections, on both sides, as ResetAll
// does; it returns how many it reset. A backend not in the rotation keeps
// nothing open, unless it left through SetBackend: those connections are
// reset too.
func (p *Proxy) RemoveBackend(backend string) int {
	p.mu.Lock()
	if i := slices.Index(p.backends, backend); i >= 0 {
		p.backends = slices.Delete(p.backends, i, i+1)
		if p.next > i {
			p.next-- // the turn stays with the backend that had it
		}
		p.removals.Add(1)
	}
	var pairs []*pair
	for c := range p.conns {
		if c.addr == backend {
			pairs = append(pairs, c)
		}
	}
	p.mu.Unlock()
	n := resetPairs(pairs)
	p.removalResets.Add(int64(n))
	return n
}

// Backends returns the rotation, in turn order from the first backend.
func (p *Proxy) Backends() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.backends)
}

// ResetAll resets every open connection, on both sides (SO_LINGER 0, so
// each peer receives a TCP RST rather than an orderly close), and returns
// how many it reset.
func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	n := resetPairs(pairs)
	if n > 0 {
		p.resetAlls.Add(1)
		p.resets.Add(int64(n))
	}
	return n
}

// SetOutage starts (on) or ends (!on) an outage. While it lasts, every
// connection the proxy accepts is reset at once, on the client's side,
// and the backend is never dialed: what clients of a load balancer whose
// backends are all down meet. Starting one also resets every open
// connection, on both sides, as ResetAll does, and returns how many; so
// no request gets through until the outage ends. Ending one (or starting
// one that already lasts) returns 0.
func (p *Proxy) SetOutage(on bool) int {
	p.mu.Lock()
	if !on || p.outage {
		p.outage = on
		p.mu.Unlock()
		return 0
	}
	// Set and snapshot under one lock: a connection that serve registers
	// later sees the outage and resets itself.
	p.outage = true
	pairs := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	p.outages.Add(1)
	n := resetPairs(pairs)
	p.outageResets.Add(int64(n))
	return n
}

// Delay holds back every byte from the backends, on open connections and
// on new ones (a new TLS handshake included), for d from now or until
// Release; the bytes then flow again, in order. The client's bytes still
// reach the server.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	until := time.Now().Add(d)
	if until.After(p.holdUntil) {
		p.holdUntil = until
	}
	p.delays.Add(1)
}

// Release ends a delay now: the bytes it held flow again, in order.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdUntil = time.Time{}
	close(p.released)
	p.released = make(chan struct{})
}

// Open returns the number of proxied connections open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:   p.accepted.Load(),
		DialErrors: p.dialErrors.Load(),
		ResetAlls:  p.resetAlls.Load(),
		Resets:     p.resets.Load(),
		Delays:     p.delays.Load(),
		HeldChunks: p.heldChunks.Load(),
		HeldFirst:  p.heldFirst.Load(),

		Outages:       p.outages.Load(),
		OutageResets:  p.outageResets.Load(),
		OutageRejects: p.outageRejects.Load(),

		Removals:      p.removals.Load(),
		RemovalResets: p.removalResets.Load(),
		NoBackend:     p.noBackend.Load(),
		Routed:        p.routedCopy(),
	}
}

func (p *Proxy) routedCopy() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.routed)
}

// Close stops accepting, closes every open connection and returns when
// all of the proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	pairs := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range pairs {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by Close, or broken: nothing more to accept
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn))
	}
}

// serve dials the backend for client and pumps bytes both ways until
// either side ends or the pair is reset or closed.
func (p *Proxy) serve(client *net.TCPConn) {
	defer p.wg.Done()
	p.mu.Lock()
	outage, backend := p.outage, ""
	if !outage && len(p.backends) > 0 {
		backend = p.backends[p.next%len(p.backends)]
		p.next = (p.next + 1) % len(p.backends)
		p.routed[backend]++
	}
	p.mu.Unlock()
	if outage {
		p.outageRejects.Add(1)
		rst(client)
		return
	}
	if backend == "" {
		// No backend in rotation: the client meets what it meets from a
		// load balancer with none, a reset.
		p.noBackend.Add(1)
		rst(client)
		return
	}

	// A dial to a stopped server is refused at once; the bound only
	// matters for a backend that does not answer at all.
	d := net.Dialer{Timeout: 5 * time.Second}
	bc, err := d.Dial("tcp", backend)
	if err != nil {
		// What a client of a load balancer with no live backend sees:
		// the connection it made is reset.
		p.dialErrors.Add(1)
		rst(client)
		return
	}
	c := &pair{addr: backend, client: client, backend: bc.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	if p.outage { // started while the backend was being dialed
		p.mu.Unlock()
		p.outageRejects.Add(1)
		c.reset()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // client to backend, never held
		defer wg.Done()
		if !pump(c.backend, c.client, nil) {
			c.close()
		}
	}()
	go func() { // backend to client, held while a delay lasts
		defer wg.Done()
		if !pump(c.client, c.backend, func() {
			if p.hold(c.done) && !c.forwarded {
				p.heldFirst.Add(1)
			}
			c.forwarded = true
		}) {
			c.close()
		}
	}()
	wg.Wait()
	c.close()
}

// hold blocks while a delay lasts, or until done is closed, and reports
// whether it blocked.
func (p *Proxy) hold(done <-chan struct{}) (held bool) {
	defer func() {
		if held {
			p.heldChunks.Add(1)
		}
	}()
	for {
		p.mu.Lock()
		wait := time.Until(p.holdUntil)
		released := p.released
		p.mu.Unlock()
		if wait <= 0 {
			return held
		}
		held = true
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-released:
			t.Stop()
		case <-done:
			t.Stop()
			return held
		}
	}
}

// pump copies from src to dst. At src's EOF it passes the orderly close
// on (dst's write side is shut, so its peer reads EOF too) and returns
// true, since the other direction may still carry data; on any other
// error it returns false. beforeWrite, if not nil, runs before each chunk
// is written.
func pump(dst, src *net.TCPConn, beforeWrite func()) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if beforeWrite != nil {
				beforeWrite()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err == io.EOF {
			return dst.CloseWrite() == nil
		}
		if err != nil {
			return false
		}
	}
}

// resetPairs resets each of pairs and returns how many it reset (a pair
// already closed is not).
func resetPairs(pairs []*pair) int {
	n := 0
	for _, c := range pairs {
		if c.reset() {
			n++
		}
	}
	return n
}

// reset closes both sides with a TCP RST, and reports whether it did: a
// pair already closed is left as it is.
func (c *pair) reset() bool {
	did := false
	c.once.Do(func() {
		rst(c.client)
		rst(c.backend)
		close(c.done)
		did = true
	})
	return did
}

// close closes both sides in an orderly way (unless reset got there first).
func (c *pair) close() {
	c.once.Do(func() {
		c.client.Close()
		c.backend.Close()
		close(c.done)
	})
}

// rst closes conn so that the peer receives a TCP RST: with SO_LINGER 0,
// close discards unsent data and resets the connection.
func rst(conn *net.TCPConn) {
	_ = conn.SetLinger(0)
	conn.Close()
}

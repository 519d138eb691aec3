package apfsim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/apiserver/pkg/util/shufflesharding"
)

// LevelConfig is one priority level of a kube-apiserver: its limited
// section (seats, queues, hand size, queue length limit) and how long its
// requests execute.
type LevelConfig struct {
	// Name names the level, for the Retry-After tracker.
	Name string
	// Seats is the level's concurrency limit: requests executing at once
	// (each request of this workload takes one seat).
	Seats int
	// Queues, HandSize and QueueLengthLimit are the level's queuing: a
	// flow is dealt HandSize of the Queues (shuffle sharding), each of at
	// most QueueLengthLimit waiting requests.
	Queues, HandSize, QueueLengthLimit int
	// GetExec and PutExec are the mean execution times of a GET and of a
	// PUT once dispatched; each request draws uniformly from half to 1.5
	// times its mean.
	GetExec, PutExec time.Duration
	// ResetDelay is how long a request takes to fail during an outage, its
	// connection reset.
	ResetDelay time.Duration
}

// Validate names each invalid field and its value.
func (c LevelConfig) Validate() error {
	var bad []string
	if c.Seats < 1 {
		bad = append(bad, fmt.Sprintf("Seats %d is below 1", c.Seats))
	}
	if c.QueueLengthLimit < 0 {
		bad = append(bad, fmt.Sprintf("QueueLengthLimit %d is below 0", c.QueueLengthLimit))
	}
	if c.GetExec <= 0 || c.PutExec <= 0 {
		bad = append(bad, fmt.Sprintf("GetExec %v and PutExec %v must be above 0", c.GetExec, c.PutExec))
	}
	if c.ResetDelay <= 0 {
		bad = append(bad, fmt.Sprintf("ResetDelay %v is not above 0", c.ResetDelay))
	}
	if _, err := shufflesharding.NewDealer(c.Queues, c.HandSize); err != nil {
		bad = append(bad, fmt.Sprintf("Queues %d and HandSize %d: %v", c.Queues, c.HandSize, err))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("apfsim: invalid level: %s", strings.Join(bad, "; "))
}

// Level is a model of a priority level as an http.RoundTripper, after
// k8s.io/apiserver's queueset: a request of a flow (its user, from the
// Impersonate-User header: one flow per user) goes to the shortest of the
// queues dealt to its flow, the hand's start rotating; it is rejected
// with 429 when every seat is in use and that queue is full, with the
// Retry-After of kube-apiserver's own dropped-requests tracker for the
// level; a free seat takes the head of the next non-empty queue, round
// robin (APF's fair queuing picks the least virtual finish time, which
// for requests of equal width and work is this order). While the level is
// down every request fails with a reset connection, after ResetDelay, and
// so do those queued or executing when it goes down. It keeps per-bin
// counts of what it answered (Stats).
type Level struct {
	cfg     LevelConfig
	dealer  *shufflesharding.Dealer
	tracker flowcontrol.DroppedRequestsTracker
	stats   *Stats

	mu       sync.Mutex
	rng      *rand.Rand
	down     bool
	epoch    int // counts the outages begun, so a request knows one began under it
	inUse    int
	queues   [][]*waiter
	waiting  int
	robin    int
	enqueues int
	hands    map[string][]int
}

// waiter is a request in a queue: dispatched receives true when it takes a
// seat, false when an outage resets it.
type waiter struct {
	dispatched chan bool
	queue      int
}

// NewLevel returns the level of cfg, up, its counts binned by stats.
func NewLevel(cfg LevelConfig, stats *Stats) (*Level, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dealer, _ := shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
	return &Level{
		cfg: cfg, dealer: dealer, stats: stats,
		tracker: flowcontrol.NewDroppedRequestsTracker(),
		rng:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		queues:  make([][]*waiter, cfg.Queues),
		hands:   map[string][]int{},
	}, nil
}

// SetDown begins (true) or ends (false) an outage.
func (l *Level) SetDown(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if down == l.down {
		return
	}
	l.down = down
	if !down {
		return
	}
	l.epoch++
	for i, q := range l.queues {
		for _, w := range q {
			w.dispatched <- false
		}
		l.queues[i] = nil
	}
	l.waiting = 0
}

// RoundTrip answers req as the level would.
func (l *Level) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	now := time.Now()
	l.mu.Lock()
	l.stats.add(now, arrived)
	if l.down {
		l.mu.Unlock()
		return l.reset(req)
	}
	epoch := l.epoch
	w := &waiter{dispatched: make(chan bool, 1), queue: l.chooseQueue(req.Header.Get("Impersonate-User"))}
	if l.inUse >= l.cfg.Seats && len(l.queues[w.queue]) >= l.cfg.QueueLengthLimit {
		l.tracker.RecordDroppedRequest(l.cfg.Name)
		after := l.tracker.GetRetryAfter(l.cfg.Name)
		l.stats.add(now, rejected)
		l.stats.retryAfter(after)
		l.mu.Unlock()
		return tooManyRequests(req, after), nil
	}
	l.queues[w.queue] = append(l.queues[w.queue], w)
	l.waiting++
	l.dispatch()
	exec := l.cfg.GetExec
	if req.Method != http.MethodGet {
		exec = l.cfg.PutExec
	}
	exec = time.Duration(float64(exec) * (0.5 + l.rng.Float64()))
	l.mu.Unlock()

	select {
	case ok := <-w.dispatched:
		if !ok {
			return l.reset(req)
		}
	case <-req.Context().Done():
		l.mu.Lock()
		l.remove(w)
		l.mu.Unlock()
		select {
		case ok := <-w.dispatched: // dispatched meanwhile: give the seat back
			if ok {
				l.finish()
			}
		default:
		}
		l.stats.add(time.Now(), abandoned)
		return nil, req.Context().Err()
	}
	l.stats.waited(time.Since(now))
	time.Sleep(exec)
	l.mu.Lock()
	reset := l.epoch != epoch
	l.mu.Unlock()
	l.finish()
	if reset {
		return l.reset(req)
	}
	l.stats.add(time.Now(), succeeded)
	return ok(req), nil
}

// chooseQueue returns the queue of user's hand with the fewest waiting
// requests, the hand's start rotating with each request.
func (l *Level) chooseQueue(user string) int {
	hand, ok := l.hands[user]
	if !ok {
		hand = l.dealer.DealIntoHand(hashFlow(l.cfg.Name, user), make([]int, 0, l.cfg.HandSize))
		l.hands[user] = hand
	}
	offset := l.enqueues % len(hand)
	l.enqueues++
	best := -1
	for i := range hand {
		q := hand[(offset+i)%len(hand)]
		if best < 0 || len(l.queues[q]) < len(l.queues[best]) {
			best = q
		}
	}
	return best
}

// hashFlow is kube-apiserver's hash of a flow (apf_controller.go's
// hashFlowID), with the level's name for the FlowSchema's.
func hashFlow(schema, user string) uint64 {
	h := sha256.New()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(user))
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

// dispatch gives free seats to the heads of the queues, round robin.
func (l *Level) dispatch() {
	for l.waiting > 0 && l.inUse < l.cfg.Seats {
		for {
			l.robin = (l.robin + 1) % len(l.queues)
			if len(l.queues[l.robin]) > 0 {
				break
			}
		}
		q := l.queues[l.robin]
		w := q[0]
		q[0] = nil
		l.queues[l.robin] = q[1:]
		l.waiting--
		l.inUse++
		w.dispatched <- true
	}
}

// remove takes w out of its queue, if it is still there.
func (l *Level) remove(w *waiter) {
	q := l.queues[w.queue]
	for i, x := range q {
		if x == w {
			l.queues[w.queue] = append(q[:i:i], q[i+1:]...)
			l.waiting--
			return
		}
	}
}

// finish frees a seat.
func (l *Level) finish() {
	l.mu.Lock()
	l.inUse--
	l.dispatch()
	l.mu.Unlock()
}

// reset fails req as a reset connection does, after ResetDelay.
func (l *Level) reset(req *http.Request) (*http.Response, error) {
	t := time.NewTimer(l.cfg.ResetDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		l.stats.add(time.Now(), abandoned)
		return nil, req.Context().Err()
	}
	l.stats.add(time.Now(), resetConn)
	return nil, resetError()
}

func tooManyRequests(req *http.Request, retryAfter int64) *http.Response {
	const text = "Too many requests, please try again later.\n"
	h := http.Header{}
	h.Set("Retry-After", strconv.FormatInt(retryAfter, 10))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return response(req, http.StatusTooManyRequests, h, text)
}

func ok(req *http.Request) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return response(req, http.StatusOK, h, `{"kind":"ConfigMap","apiVersion":"v1"}`)
}

func response(req *http.Request, code int, h http.Header, body string) *http.Response {
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}
}

// resetError is the error of a reset connection, as net/http returns it.
func resetError() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

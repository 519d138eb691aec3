package retry

import (
	"hash/maphash"
	"net/http"
	"sync"
	"time"
)

// resendSets and resendWays shape the resend table: a request's key picks
// a set, whose ways hold the latest keys of that set.
const (
	resendSets = 128
	resendWays = 4
)

// resendTable remembers the requests whose latest answer client-go
// resends, and which of their scopes that answer was a failure of, for a
// Window: a set-associative cache of their keys, of a fixed size, so that
// memory does not grow with the number of URLs. Its lock guards every
// field but seed, which never changes.
type resendTable struct {
	seed   maphash.Seed
	mu     sync.Mutex
	live   int       // entries held; 0 spares a request the hash
	newest time.Time // the latest record
	sets   [resendSets][resendWays]resendEntry
}

type resendEntry struct {
	key    uint64 // 0: empty
	at     time.Time
	failed scopeKind // the scope whose failure client-go resends after
	cause  failure   // that failure
}

func newResendTable() *resendTable { return &resendTable{seed: maphash.MakeSeed()} }

// key is a hash of req's method and URL, never 0.
func (t *resendTable) key(req *http.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	u := req.URL
	for _, s := range [...]string{req.Method, u.Scheme, u.Host, u.Path, u.RawQuery} {
		_, _ = h.WriteString(s)
		_ = h.WriteByte(0)
	}
	return max(h.Sum64(), 1)
}

// recent returns, when req's resendable answer came less than window
// before now (read from ts only when the table holds anything), the kind
// of the scope that answer was a failure of (serverScope or
// resourceScope) and the failure; else noScope. known reports whether the
// table held req at all, which settle then needs. When every entry is that
// old, it empties the table.
func (t *resendTable) recent(req *http.Request, ts timeSource, window time.Duration) (failed scopeKind, cause failure, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == 0 {
		return noScope, failure{}, false
	}
	now := ts.now()
	if now.Sub(t.newest) >= window {
		t.sets = [resendSets][resendWays]resendEntry{}
		t.live = 0
		return noScope, failure{}, false
	}
	key := t.key(req)
	set := &t.sets[key%resendSets]
	for i := range set {
		if set[i].key == key {
			if now.Sub(set[i].at) < window {
				return set[i].failed, set[i].cause, true
			}
			return noScope, failure{}, true
		}
	}
	return noScope, failure{}, false
}

// settle records req's latest answer, at a time read from ts: one that
// client-go resends, a failure of a scope of kind failed (noScope: an
// answer it does not resend), is remembered with that kind, in place of
// the oldest entry of its set when the set is full; any other replaces an
// earlier one of req (known). cause is the failure client-go resends
// after.
func (t *resendTable) settle(req *http.Request, ts timeSource, failed scopeKind, known bool, cause failure) {
	if failed == noScope && !known {
		return
	}
	now := ts.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := t.key(req)
	set := &t.sets[key%resendSets]
	if failed == noScope {
		for i := range set {
			if set[i].key == key {
				set[i] = resendEntry{}
				t.live--
				return
			}
		}
		return
	}
	slot := 0
	for i := range set {
		switch e := &set[i]; {
		case e.key == key:
			e.at, e.failed, e.cause = now, failed, cause
			t.newest = maxTime(t.newest, now)
			return
		case e.key == 0:
			slot = i
		case set[slot].key != 0 && e.at.Before(set[slot].at):
			slot = i
		}
	}
	if set[slot].key == 0 {
		t.live++
	}
	set[slot] = resendEntry{key: key, at: now, failed: failed, cause: cause}
	t.newest = maxTime(t.newest, now)
}

// forget drops req, whose resend the budget refused.
func (t *resendTable) forget(req *http.Request) {
	t.settle(req, timeSource{}, noScope, true, failure{})
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

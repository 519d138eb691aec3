package apfsim

import (
	"sync/atomic"
	"time"
)

// outcome is what the level did with a request, for Stats.
type outcome int

const (
	arrived   outcome = iota // reached the level (every request)
	succeeded                // answered 200
	rejected                 // answered 429
	resetConn                // failed with a reset connection
	abandoned                // its context ended first (the run's end)
	numOutcomes
)

// Stats counts the level's requests per bin of time from its start, and
// the longest a request waited in a queue. It is safe for concurrent use.
type Stats struct {
	start   time.Time
	bin     time.Duration
	bins    [][numOutcomes]atomic.Int64
	maxWait atomic.Int64
	maxRA   atomic.Int64 // the largest Retry-After answered, in seconds
}

// NewStats returns counts in bins of bin from now, for span; what comes
// later counts in the last bin.
func NewStats(bin, span time.Duration) *Stats {
	n := int(span/bin) + 1
	return &Stats{start: time.Now(), bin: bin, bins: make([][numOutcomes]atomic.Int64, n)}
}

func (s *Stats) add(at time.Time, o outcome) {
	i := min(max(int(at.Sub(s.start)/s.bin), 0), len(s.bins)-1)
	s.bins[i][o].Add(1)
}

func (s *Stats) waited(d time.Duration) { storeMax(&s.maxWait, int64(d)) }

func (s *Stats) retryAfter(seconds int64) { storeMax(&s.maxRA, seconds) }

// storeMax raises m to v when v is larger.
func storeMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// MaxRetryAfter returns the largest Retry-After the level answered, in
// seconds (0: none).
func (s *Stats) MaxRetryAfter() int64 { return s.maxRA.Load() }

// Bin returns the bins' width.
func (s *Stats) Bin() time.Duration { return s.bin }

// Bins returns the number of bins.
func (s *Stats) Bins() int { return len(s.bins) }

// Count returns the requests of bin i: arrived, answered 200, answered 429
// and reset (the others' contexts ended first, at the run's end).
func (s *Stats) Count(i int) (arrivedN, ok, tooMany, reset int64) {
	b := &s.bins[i]
	return b[arrived].Load(), b[succeeded].Load(), b[rejected].Load(), b[resetConn].Load()
}

// Abandoned returns the requests whose contexts ended before an answer.
func (s *Stats) Abandoned() (n int64) {
	for i := range s.bins {
		n += s.bins[i][abandoned].Load()
	}
	return n
}

// Sum returns the counts of the bins from from (included) to to (not
// included), offsets from the start.
func (s *Stats) Sum(from, to time.Duration) (arrivedN, ok, tooMany, reset int64) {
	for i := int(from / s.bin); i < int(to/s.bin) && i < len(s.bins); i++ {
		a, o, t, r := s.Count(i)
		arrivedN, ok, tooMany, reset = arrivedN+a, ok+o, tooMany+t, reset+r
	}
	return
}

// MaxWait returns the longest a request waited in a queue.
func (s *Stats) MaxWait() time.Duration { return time.Duration(s.maxWait.Load()) }

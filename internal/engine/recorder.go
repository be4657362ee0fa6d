package engine

import (
	"sync"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

// slot is one interval's data.
type slot struct {
	hists  *hist.Set
	counts measure.Counts
}

func newSlot() *slot { return &slot{hists: hist.NewSet()} }

func (s *slot) reset() {
	s.hists.Reset()
	s.counts = measure.Counts{}
}

// ringSize is how many intervals a recorder holds at once: the interval
// collector may fall this many intervals behind (a starved agent, a short
// interval) before samples are misattributed. Slots are allocated only
// when a sample needs one, so a lagging collector costs memory only while
// it lags.
const ringSize = 64

// recorder is one worker's measurement state. Its connections record into
// it under mu, which only they and the interval collector take (never shared
// across workers). It holds a ring of interval slots keyed by interval
// index, so a sample lands in the interval its end time belongs to even
// when the collector has not yet handed out the previous ones. Outcomes
// that end in the warm-up go to warmup.
type recorder struct {
	mu     sync.Mutex
	idx    int // oldest interval not yet handed out
	ring   [ringSize]*slot
	free   []*slot // reset slots, reused before allocating
	warmup measure.Counts
	// mix measures each request of a mix apart over the window (nil when
	// the plan has one request, or more than MaxMixReported).
	mix mixRecorder
}

// newRecorder returns a recorder for a plan of entries requests.
func newRecorder(entries int) *recorder {
	r := &recorder{mix: newMixRecorder(entries)}
	r.ring[0] = newSlot()
	r.free = []*slot{newSlot()}
	return r
}

// counts returns the counts for interval k (k < 0: warm-up). Called with
// mu held.
func (r *recorder) counts(k int) *measure.Counts {
	if k < 0 {
		return &r.warmup
	}
	return &r.slotFor(k).counts
}

// slotFor returns the slot for interval k >= 0. Called with mu held. A
// sample older than the oldest pending interval (its recording was delayed
// past the hand-out) lands in the oldest; one more than ringSize ahead, in
// the newest.
func (r *recorder) slotFor(k int) *slot {
	k = min(max(k, r.idx), r.idx+ringSize-1)
	s := r.ring[k%ringSize]
	if s == nil {
		if n := len(r.free); n > 0 {
			s, r.free = r.free[n-1], r.free[:n-1]
		} else {
			s = newSlot()
		}
		r.ring[k%ringSize] = s
	}
	return s
}

// swap hands out the slot of interval r.idx (spare itself when nothing was
// recorded in it) and advances to the next interval. spare must be reset;
// it is kept for reuse when not handed out.
func (r *recorder) swap(spare *slot) *slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ring[r.idx%ringSize]
	r.ring[r.idx%ringSize] = nil
	r.idx++
	if out == nil {
		return spare
	}
	r.free = append(r.free, spare)
	return out
}

// connInfo describes a newly opened connection.
type connInfo struct {
	connect   int64 // µs
	handshake int64 // µs; 0 without TLS
	tls       bool
	resumed   bool
	offered   bool // a cached session was offered (resumed, or refused)
	// early: the first request went in 0-RTT (plan TLS.EarlyData);
	// earlyAccepted: the server accepted it.
	early, earlyAccepted bool
	version              string
	cipher               string
	group                string
	alpn                 string
	reconnect            bool
	// done is when the connection was ready (its handshake's end, its
	// connect's without TLS); intended, for a connection-rate ticket's
	// connection, its intended start (zero otherwise): done − intended is
	// its handshake latency (hist.HandshakeLatency).
	done, intended time.Time
	// quic: a QUIC connection, whose handshake is its opening (no TCP
	// connect: connect is not recorded); transport names its version
	// ("QUIC v1").
	quic      bool
	transport string
}

// recordConn records a new connection in interval k. Called with mu held.
func (r *recorder) recordConn(k int, ci *connInfo) {
	c := r.counts(k)
	c.ConnectionsOpened++
	if ci.reconnect {
		c.Reconnects++
	}
	if k >= 0 {
		s := r.slotFor(k)
		if !ci.intended.IsZero() {
			s.hists.HandshakeLatency.Record(max(ci.done.Sub(ci.intended), 0))
		}
		if !ci.quic {
			s.hists.Connect.RecordMicros(ci.connect)
		}
		if ci.tls {
			if ci.resumed {
				s.hists.TLSResumed.RecordMicros(ci.handshake)
			} else {
				s.hists.TLSFull.RecordMicros(ci.handshake)
			}
		}
	}
	if ci.early {
		c.HandshakesEarlyOffered++
		if ci.earlyAccepted {
			c.HandshakesEarlyAccepted++
		}
	}
	if !ci.tls {
		return
	}
	if ci.resumed {
		c.HandshakesResumed++
	} else {
		c.HandshakesFull++
		if ci.offered {
			c.HandshakesRefused++
		}
	}
	if c.TLS == nil {
		c.TLS = map[string]int64{}
	}
	c.TLS["version:"+ci.version]++
	c.TLS["cipher:"+ci.cipher]++
	if ci.group != "" {
		c.TLS["group:"+ci.group]++
	}
	if ci.alpn != "" {
		c.TLS["alpn:"+ci.alpn]++
	}
	if ci.transport != "" {
		c.TLS["transport:"+ci.transport]++
	}
}

package engine

import (
	"sync"

	"github.com/phalanxload/phalanx/internal/hist"
)

// maxStatus bounds the status codes counted individually; a final status
// outside [100, maxStatus) is a protocol error.
const maxStatus = 600

// Counts are the outcomes of one interval (or one run) of one engine.
type Counts struct {
	// Requests counts completed responses.
	Requests int64
	// BytesRead counts response wire bytes (see response.wireBytes).
	BytesRead int64
	// Status counts completed responses by status code.
	Status [maxStatus]int64
	// Errors counts failed requests by kind.
	Errors [numErrorKinds]int64
	// ConnectionsOpened counts connections opened (and handshaken).
	ConnectionsOpened int64
	// Reconnects counts connections reopened after a server close or an
	// error (not the per-request opens of no-keep-alive mode).
	Reconnects int64
	// Retries counts requests sent again because the server never
	// processed them (HTTP/2 streams above a GOAWAY's last stream ID).
	Retries int64
	// HandshakesFull and HandshakesResumed count TLS handshakes.
	HandshakesFull, HandshakesResumed int64
	// Missed counts open-loop sends that started more than MissThreshold
	// after their intended time (they were still sent).
	Missed int64
	// TLS counts negotiated parameters per connection ("version:TLS 1.3",
	// "cipher:...", "group:X25519", "alpn:h2"). Nil until the first.
	TLS map[string]int64
}

// Add adds o to c.
func (c *Counts) Add(o *Counts) {
	c.Requests += o.Requests
	c.BytesRead += o.BytesRead
	for i := range c.Status {
		c.Status[i] += o.Status[i]
	}
	for i := range c.Errors {
		c.Errors[i] += o.Errors[i]
	}
	c.ConnectionsOpened += o.ConnectionsOpened
	c.Reconnects += o.Reconnects
	c.Retries += o.Retries
	c.Missed += o.Missed
	c.HandshakesFull += o.HandshakesFull
	c.HandshakesResumed += o.HandshakesResumed
	for k, v := range o.TLS {
		if c.TLS == nil {
			c.TLS = map[string]int64{}
		}
		c.TLS[k] += v
	}
}

// ErrorTotal returns the number of failed requests.
func (c *Counts) ErrorTotal() int64 {
	var n int64
	for _, v := range c.Errors {
		n += v
	}
	return n
}

// StatusMap returns the non-zero status counts.
func (c *Counts) StatusMap() map[int]int64 {
	m := map[int]int64{}
	for code, v := range c.Status {
		if v != 0 {
			m[code] = v
		}
	}
	return m
}

// ErrorMap returns the non-zero error counts by kind name.
func (c *Counts) ErrorMap() map[string]int64 {
	m := map[string]int64{}
	for k, v := range c.Errors {
		if v != 0 {
			m[ErrorKind(k).String()] = v
		}
	}
	return m
}

// Histograms are the histograms of one interval (µs).
type Histograms struct {
	// Latency: completed responses, from the request's start to its last
	// body byte.
	Latency *hist.Histogram
	// Connect: TCP connect time of new connections.
	Connect *hist.Histogram
	// TLSFull and TLSResumed: TLS handshake time of new connections.
	TLSFull, TLSResumed *hist.Histogram
	// TTFB: from the request's write to its first response byte.
	TTFB *hist.Histogram
	// Service: open loop only, completed responses from the actual send
	// (Latency then runs from the intended send time).
	Service *hist.Histogram
}

// NewHistograms returns empty histograms.
func NewHistograms() Histograms {
	return Histograms{Latency: hist.New(), Connect: hist.New(), TLSFull: hist.New(), TLSResumed: hist.New(), TTFB: hist.New(), Service: hist.New()}
}

// all returns the histograms in a fixed order.
func (h *Histograms) all() [6]*hist.Histogram {
	return [6]*hist.Histogram{h.Latency, h.Connect, h.TLSFull, h.TLSResumed, h.TTFB, h.Service}
}

// Merge adds o to h.
func (h *Histograms) Merge(o *Histograms) error {
	dst, src := h.all(), o.all()
	for i := range dst {
		if err := dst[i].Merge(src[i]); err != nil {
			return err
		}
	}
	return nil
}

func (h *Histograms) reset() {
	for _, x := range h.all() {
		x.Reset()
	}
}

// slot is one interval's data.
type slot struct {
	hists  Histograms
	counts Counts
}

func newSlot() *slot { return &slot{hists: NewHistograms()} }

func (s *slot) reset() {
	s.hists.reset()
	s.counts = Counts{}
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
	warmup Counts
}

func newRecorder() *recorder {
	r := &recorder{}
	r.ring[0] = newSlot()
	r.free = []*slot{newSlot()}
	return r
}

// counts returns the counts for interval k (k < 0: warm-up). Called with
// mu held.
func (r *recorder) counts(k int) *Counts {
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
	version   string
	cipher    string
	group     string
	alpn      string
	reconnect bool
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
		s.hists.Connect.RecordMicros(ci.connect)
		if ci.tls {
			if ci.resumed {
				s.hists.TLSResumed.RecordMicros(ci.handshake)
			} else {
				s.hists.TLSFull.RecordMicros(ci.handshake)
			}
		}
	}
	if !ci.tls {
		return
	}
	if ci.resumed {
		c.HandshakesResumed++
	} else {
		c.HandshakesFull++
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
}

package hist

// Kind names one histogram of a Set.
type Kind uint8

// The histograms of a Set, in the order reports list them.
const (
	// Latency: completed responses, from the request's start (its write,
	// its connect when it opened its connection, or in open loop its
	// intended send time) to its last body byte.
	Latency Kind = iota
	// Service: open loop only, completed responses from the actual send
	// (wrk2's uncorrected histogram).
	Service
	// Connect: TCP connect time of new connections.
	Connect
	// TLSFull and TLSResumed: TLS handshake time of new connections.
	TLSFull
	TLSResumed
	// TTFB: from the request's write to its first response byte.
	TTFB
	// Lateness: open loop only, every send's lateness: its actual send
	// (the write, or the connect when it opened its connection) minus its
	// intended send time, whatever its outcome. It is the tool's own error
	// in the latency, which runs from the intended time.
	Lateness
	// OK: the completed responses of status 200-399 only, timed as
	// Latency (their success latency): beside Latency, which takes every
	// completed response, so that a server answering fast 429s or 503s
	// under overload does not make the latency look better as it fails. It
	// cannot be derived from merged Latency histograms, so every interval
	// carries its own.
	OK
	// HandshakeLatency: connection-rate plans only, every connection
	// opened, from its intended start (its ticket's time) to its TLS
	// handshake's end (its TCP connect's end in clear text): the
	// handshake's latency with no coordinated omission, the start's
	// lateness included (TLSFull and TLSResumed time the handshake alone).
	HandshakeLatency
	// NumKinds is the number of kinds (not a kind).
	NumKinds
)

var kindNames = [NumKinds]string{"latency", "service", "connect", "tls_full", "tls_resumed", "ttfb", "lateness", "ok", "handshake_latency"}

// String returns the kind's name: latency, service, connect, tls_full,
// tls_resumed, ttfb, lateness, ok or handshake_latency ("unknown" outside
// them).
func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Set is the named histogram set of an interval, a stage or a run (µs,
// Phalanx's geometry). The zero value has nil histograms: use NewSet.
type Set struct {
	Latency, Service, Connect, TLSFull, TLSResumed, TTFB, Lateness, OK, HandshakeLatency *Histogram
}

// NewSet returns a set of empty histograms.
func NewSet() *Set {
	return &Set{Latency: New(), Service: New(), Connect: New(), TLSFull: New(), TLSResumed: New(), TTFB: New(), Lateness: New(), OK: New(), HandshakeLatency: New()}
}

// Get returns the histogram of kind k (nil for a kind outside the set).
func (s *Set) Get(k Kind) *Histogram {
	if f := s.field(k); f != nil {
		return *f
	}
	return nil
}

// Put makes h the histogram of kind k (a kind outside the set is ignored).
func (s *Set) Put(k Kind, h *Histogram) {
	if f := s.field(k); f != nil {
		*f = h
	}
}

// field is the one map from kinds to Set's fields.
func (s *Set) field(k Kind) **Histogram {
	switch k {
	case Latency:
		return &s.Latency
	case Service:
		return &s.Service
	case Connect:
		return &s.Connect
	case TLSFull:
		return &s.TLSFull
	case TLSResumed:
		return &s.TLSResumed
	case TTFB:
		return &s.TTFB
	case Lateness:
		return &s.Lateness
	case OK:
		return &s.OK
	case HandshakeLatency:
		return &s.HandshakeLatency
	}
	return nil
}

// Merge adds every histogram of o to s's of the same kind (exact: both
// have the package geometry).
func (s *Set) Merge(o *Set) error {
	for k := range NumKinds {
		if err := s.Get(k).Merge(o.Get(k)); err != nil {
			return err
		}
	}
	return nil
}

// Reset empties every histogram, keeping its memory.
func (s *Set) Reset() {
	for k := range NumKinds {
		s.Get(k).Reset()
	}
}

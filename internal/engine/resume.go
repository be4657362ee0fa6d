package engine

import (
	"crypto/tls"
	"math"
	"sync/atomic"
)

// resumeMix is a worker's session resumption (Plan.TLS.Resume): its session
// cache, and which of its handshakes offer a session from it
// (Plan.TLS.ResumeRatio). Every handshake is then classified by what
// happened: full (no session offered), resumed, or offered but refused
// (a full handshake although a session was offered: tls.ConnectionState's
// DidResume false).
type resumeMix struct {
	ratio float64 // 0: every handshake offers
	// copies: each offer gets its own copy of the cached session (QUIC:
	// quic-go writes into the session state it resumes, which two
	// handshakes offering one cached session at once would share).
	copies bool
	n      atomic.Int64
	cache  tls.ClientSessionCache
	offer  *tls.Config // with the cache, cloned per handshake to see its offer
	full   *tls.Config // without a cache: offers nothing, keeps nothing
}

func newResumeMix(base *tls.Config, ratio float64) *resumeMix {
	m := &resumeMix{ratio: ratio, cache: tls.NewLRUClientSessionCache(64), offer: base.Clone(), full: base.Clone()}
	m.offer.ClientSessionCache = m.cache
	return m
}

// next returns the configuration of the worker's next handshake and, when
// it may offer a session, the cache view that records whether it did. The
// n-th handshake offers when floor((n+1)·ratio) > floor(n·ratio): exactly
// ratio of any run of them, to within one.
func (m *resumeMix) next() (*tls.Config, *offerCache) {
	if m.ratio > 0 {
		n := float64(m.n.Add(1) - 1)
		if math.Floor((n+1)*m.ratio) == math.Floor(n*m.ratio) {
			return m.full, nil
		}
	}
	oc := &offerCache{ClientSessionCache: m.cache, copies: m.copies}
	conf := m.offer.Clone()
	conf.ClientSessionCache = oc
	return conf, oc
}

// offerCache is one handshake's view of the worker's session cache: it
// records whether the handshake found a session to offer.
type offerCache struct {
	tls.ClientSessionCache
	offered bool
	copies  bool // resumeMix.copies
}

func (o *offerCache) Get(key string) (*tls.ClientSessionState, bool) {
	s, ok := o.ClientSessionCache.Get(key)
	if ok && s != nil {
		if o.copies {
			if s = copySession(s); s == nil {
				return nil, false // not copyable: offer nothing, a full handshake
			}
		}
		o.offered = true
	}
	return s, ok
}

// copySession returns a copy of s that shares no state with it (through
// its encoding, crypto/tls's SessionState.Bytes and ParseSessionState), or
// nil when s does not encode.
func copySession(s *tls.ClientSessionState) *tls.ClientSessionState {
	ticket, st, err := s.ResumptionState()
	if err != nil || st == nil {
		return nil
	}
	b, err := st.Bytes()
	if err != nil {
		return nil
	}
	cp, err := tls.ParseSessionState(b)
	if err != nil {
		return nil
	}
	cs, err := tls.NewResumptionState(append([]byte(nil), ticket...), cp)
	if err != nil {
		return nil
	}
	return cs
}

package measure

import (
	"fmt"
	"time"
)

// MissThreshold is how late an open-loop send may start before it counts
// as missed (Counts.Missed). Go's timers wake up to about a millisecond
// late on an idle machine (and more in a VM), so a tighter bound would
// flag every run; lateness below it still shows in the latency, measured
// from the intended time.
const MissThreshold = 5 * time.Millisecond

// ClientLateLimit is how late after both its intended time and its
// connection's freeing an open-loop send may leave before it counts as
// ClientLate: the agent's own delay at which its lateness becomes a
// visible part of a latency checked against a millisecond-scale
// objective. The engine's precise pacer stays well under it on an agent
// below 90 % CPU (its lateness p99 is tens to hundreds of microseconds:
// README, Performance); a starved agent exceeds it. More than 1 % of the
// sends over it flag a run client-bound (report.LatenessLimit).
const ClientLateLimit = time.Millisecond

// MaxStatus bounds the status codes counted individually: a final status
// outside [100, MaxStatus) is a protocol error (ErrProtocol), never a
// count.
const MaxStatus = 600

// Counts are the request outcomes of an interval, a stage, an agent or a
// run. Every request that ended is in exactly one bucket: a status code
// (completed) or an error kind (failed). The zero value is empty and ready
// to use.
type Counts struct {
	// Issued counts requests written (or attempted). It is kept only on
	// totals, an agent's or a run's (the engine's Result.Issued): intervals
	// and stages count outcomes by the time they ended, and a request
	// issued in one interval may end in another or not at all, so there
	// Issued is 0. On a total, Issued = Requests + ErrorTotal() + in
	// flight.
	Issued int64
	// Requests counts completed responses (any status code).
	Requests int64
	// BytesRead counts response wire bytes (headers, framing, body).
	BytesRead int64
	// HeaderBytes and BodyBytes split the completed responses' BytesRead
	// (h2load's "traffic: headers, data"): HeaderBytes their header
	// sections as on the wire (HTTP/1.1 status and header lines, interim
	// responses and trailers included; HTTP/2 the HPACK blocks of HEADERS
	// and CONTINUATION frames, as h2load counts them), BodyBytes their bodies as received, still content-encoded
	// (HTTP/1.1 without chunk framing; HTTP/2 DATA payloads). The rest of
	// BytesRead is framing.
	HeaderBytes, BodyBytes int64
	// HeaderFieldBytes counts the header sections decoded: over HTTP/2 the
	// lengths of every field's name and value (h2load's bytes_head_decomp:
	// its "space savings" are 1 - HeaderBytes/HeaderFieldBytes), over
	// HTTP/1.1 HeaderBytes again (nothing is compressed), as h2load counts.
	HeaderFieldBytes int64
	// Encodings counts completed responses by Content-Encoding.
	Encodings [NumEncodings]int64
	// Status counts completed responses by status code.
	Status [MaxStatus]int64
	// Errors counts failed requests by kind.
	Errors [NumErrorKinds]int64
	// ConnectionsOpened counts connections opened (and handshaken).
	ConnectionsOpened int64
	// Reconnects counts connections reopened after a server close or an
	// error (not the per-request opens of no-keep-alive mode).
	Reconnects int64
	// Retries counts requests sent again because the server never
	// processed them (HTTP/2 streams above a GOAWAY's last stream ID;
	// HTTP/1.1 requests on a reused connection that met the server's close
	// or reset before any response byte).
	Retries int64
	// Redirects counts the redirect hops followed (the plan's
	// MaxRedirects): each is one more request (an HTTP/2 or HTTP/3 stream) the server received beyond
	// the exchange's first, so the server's access log holds Requests +
	// Redirects + the failed exchanges it answered. An exchange is counted
	// once, in Requests (its final response) or Errors, whatever its hops.
	Redirects int64
	// HandshakesFull and HandshakesResumed count TLS handshakes.
	HandshakesFull, HandshakesResumed int64
	// HandshakesRefused counts the full handshakes (among HandshakesFull)
	// that offered a cached session the server did not resume.
	HandshakesRefused int64
	// HandshakesEarlyOffered counts the HTTP/3 handshakes that sent their
	// connection's first request in 0-RTT (TLS 1.3 early data, RFC 9001
	// section 4.6; plan TLS.EarlyData), among those that offered a
	// session; HandshakesEarlyAccepted those whose server accepted it (a
	// part of HandshakesResumed). Offered − accepted were rejected: the
	// request was sent again on a new connection, counted once.
	HandshakesEarlyOffered, HandshakesEarlyAccepted int64
	// Missed counts open-loop sends that started more than the engine's
	// MissThreshold (5 ms) after their intended time (they were still
	// sent).
	Missed int64
	// Unsent counts open-loop sends the schedule had due in the window
	// that no connection took before it closed (every one was busy):
	// never sent, so not in Issued; they are part of Missed. On a total,
	// the sends scheduled are Issued + Unsent.
	Unsent int64
	// Backlogged is the part of Missed late because every connection was
	// busy when the send was due (the server held them: a backlog at the
	// connection cap), Unsent included; Missed − Backlogged were late by
	// the client's own scheduling (docs/design.md, invariant 6).
	Backlogged int64
	// GrowthRefused counts open-loop sends found due for more than
	// MissThreshold with every connection busy and the connection cap
	// reached (Plan.MaxConnections: --max-open, --max-connections), so
	// that no connection could be added to take them: each is counted
	// once, in the interval it was found, and is late (on a total, part
	// of Missed). Only a worker that may grow (a cap above its
	// connections, or a connection rate) counts them.
	GrowthRefused int64
	// Queued counts the open-loop sends whose connection was still busy at
	// their intended time (its previous response not yet read), so that
	// they left when it freed: their lateness is the wait for a
	// connection, the server's (or too few connections'), not the
	// client's. Over MissThreshold, such a send is also Backlogged.
	Queued int64
	// ClientLate counts the open-loop sends that left more than
	// ClientLateLimit after both their intended time and their
	// connection's freeing: the client's own delay (a late timer wake, a
	// starved CPU), which a wait for a busy connection never adds to.
	ClientLate int64
	// Carried counts the open-loop sends intended in the warm-up that
	// ended in the window (or were in flight at its end): they are among
	// Requests (outcomes go by their end), errors and in flight, but not
	// among the window's scheduled sends, so Missed, Backlogged, Queued,
	// ClientLate and the lateness histogram leave them out. On a total,
	// the sends scheduled in the window are Issued + Unsent − Carried.
	Carried int64
	// TLS counts negotiated parameters per connection, keyed
	// "version:TLS 1.3", "cipher:...", "group:X25519", "alpn:h2". Nil until
	// the first.
	TLS map[string]int64
}

// Add adds o to c: the one adder of counters (a field added to Counts is
// added here).
func (c *Counts) Add(o *Counts) {
	c.Issued += o.Issued
	c.Requests += o.Requests
	c.BytesRead += o.BytesRead
	c.HeaderBytes += o.HeaderBytes
	c.BodyBytes += o.BodyBytes
	c.HeaderFieldBytes += o.HeaderFieldBytes
	for i := range c.Encodings {
		c.Encodings[i] += o.Encodings[i]
	}
	for i := range c.Status {
		c.Status[i] += o.Status[i]
	}
	for i := range c.Errors {
		c.Errors[i] += o.Errors[i]
	}
	c.ConnectionsOpened += o.ConnectionsOpened
	c.Reconnects += o.Reconnects
	c.Retries += o.Retries
	c.Redirects += o.Redirects
	c.Missed += o.Missed
	c.Backlogged += o.Backlogged
	c.Unsent += o.Unsent
	c.GrowthRefused += o.GrowthRefused
	c.Queued += o.Queued
	c.ClientLate += o.ClientLate
	c.Carried += o.Carried
	c.HandshakesFull += o.HandshakesFull
	c.HandshakesRefused += o.HandshakesRefused
	c.HandshakesResumed += o.HandshakesResumed
	c.HandshakesEarlyOffered += o.HandshakesEarlyOffered
	c.HandshakesEarlyAccepted += o.HandshakesEarlyAccepted
	for k, v := range o.TLS {
		if c.TLS == nil {
			c.TLS = map[string]int64{}
		}
		c.TLS[k] += v
	}
}

// ErrorTotal returns the number of failed requests: the one place the
// error total is computed.
func (c *Counts) ErrorTotal() int64 {
	var n int64
	for _, v := range c.Errors {
		n += v
	}
	return n
}

// Ended returns the requests that ended: completed plus failed.
func (c *Counts) Ended() int64 { return c.Requests + c.ErrorTotal() }

// StatusMap returns the non-zero status counts by code.
func (c *Counts) StatusMap() map[int]int64 {
	m := map[int]int64{}
	for code, v := range c.Status {
		if v != 0 {
			m[code] = v
		}
	}
	return m
}

// ErrorMap returns the non-zero error counts by kind name
// (ErrorKind.String).
func (c *Counts) ErrorMap() map[string]int64 {
	m := map[string]int64{}
	for k, v := range c.Errors {
		if v != 0 {
			m[ErrorKind(k).String()] = v
		}
	}
	return m
}

// EncodingMap returns the non-zero Content-Encoding counts by name
// (Encoding.String).
func (c *Counts) EncodingMap() map[string]int64 {
	m := map[string]int64{}
	for e, v := range c.Encodings {
		if v != 0 {
			m[Encoding(e).String()] = v
		}
	}
	return m
}

// AddStatus adds n completed responses of status code. Errors: a code
// outside [0, MaxStatus).
func (c *Counts) AddStatus(code int, n int64) error {
	if code < 0 || code >= MaxStatus {
		return fmt.Errorf("status code %d outside [0, %d)", code, MaxStatus)
	}
	c.Status[code] += n
	return nil
}

// AddError adds n failed requests of the kind named name. Errors: a name
// that is no kind's.
func (c *Counts) AddError(name string, n int64) error {
	k, err := ParseErrorKind(name)
	if err != nil {
		return err
	}
	c.Errors[k] += n
	return nil
}

package measure

import "fmt"

// ErrorKind classifies a failed request. Every failed request has exactly
// one kind.
type ErrorKind uint8

// Error kinds, in report order.
const (
	// ErrConnect: the TCP connection could not be opened.
	ErrConnect ErrorKind = iota
	// ErrTLS: the TLS handshake failed.
	ErrTLS
	// ErrTimeout: the request did not end within the plan's timeout.
	ErrTimeout
	// ErrReset: the peer reset the connection (RST).
	ErrReset
	// ErrClosed: the peer closed the connection before any response byte.
	ErrClosed
	// ErrTruncated: the peer closed the connection inside a response.
	ErrTruncated
	// ErrProtocol: the response was not valid HTTP.
	ErrProtocol
	// ErrLocal: a client-side limit or failure (file descriptors, ports).
	ErrLocal
	// ErrRefused: the server refused the request without processing it,
	// twice (HTTP/2 RST_STREAM(REFUSED_STREAM), or a stream above a
	// GOAWAY's last stream ID; RFC 9113 section 8.7): the first refusal is
	// resent once, as a retry, and only the second is an error.
	ErrRefused
	// ErrRedirect: with the plan's MaxRedirects above 0, a redirect that
	// was not followed: one more 3xx with a Location after MaxRedirects
	// hops (a loop, or too many hops), or a Location the engine does not
	// follow (another origin, not a URL). Every hop sent before it is in
	// Counts.Redirects.
	ErrRedirect
	// ErrPorts: no local address and port was free for a new connection
	// (EADDRNOTAVAIL: the ephemeral ports of the source addresses are
	// used up, typically by TIME_WAIT sockets). PortsAdvice says what to
	// do.
	ErrPorts
	// NumErrorKinds is the number of kinds (not a kind).
	NumErrorKinds
)

var errorKindNames = [NumErrorKinds]string{"connect", "tls", "timeout", "reset", "closed", "truncated", "protocol", "local", "refused", "redirect", "ports"}

// PortsAdvice is what to do about ErrPorts errors, for messages and the
// report.
const PortsAdvice = "the client ran out of ephemeral ports (EADDRNOTAVAIL): add source addresses (--source-ips), close with --close rst (no TIME_WAIT), set net.ipv4.tcp_tw_reuse=1 or widen net.ipv4.ip_local_port_range"

// String returns the kind's report name (lowercase, e.g. "reset"), the
// key of the proto's Counters.errors map; "unknown" outside the kinds.
func (k ErrorKind) String() string {
	if k < NumErrorKinds {
		return errorKindNames[k]
	}
	return "unknown"
}

// ParseErrorKind returns the kind named name (String's inverse). Errors:
// a name that is no kind's.
func ParseErrorKind(name string) (ErrorKind, error) {
	for k, n := range errorKindNames {
		if n == name {
			return ErrorKind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown error kind %q", name)
}

package plan

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// validateHTTP3 checks a plan of protocol H3 (HTTP/3 over QUIC, RFC 9114
// and RFC 9000) against what QUIC allows and what the engine's HTTP/3
// client does: https only (QUIC always carries TLS 1.3, RFC 9001), no TCP
// options; tls.early_data only there, with tls.resume and idempotent
// methods (validateEarlyData).
func (p *Plan) validateHTTP3(t Target, parsed bool) []error {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	p.validateEarlyData(bad)
	if p.Protocol != H3 {
		return errs
	}
	if parsed && !t.TLS {
		bad("url", fmt.Sprintf("%q", redactURL(p.URL)), "http3 runs over QUIC, which always uses TLS: want an https:// URL")
	}
	if v, ok := TLSVersion(p.TLS.MaxVersion); p.TLS.MaxVersion != "" && ok && v < tls.VersionTLS13 {
		bad("tls.max_version", p.TLS.MaxVersion, "QUIC uses TLS 1.3 only (RFC 9001 section 4.2): leave it unset or 1.3")
	}
	if len(p.TLS.Ciphers) > 0 {
		bad("tls.ciphers", strings.Join(p.TLS.Ciphers, ","), "QUIC uses TLS 1.3, whose suites crypto/tls does not let one choose: leave it unset")
	}
	if len(p.TLS.ALPN) > 0 && !contains(p.TLS.ALPN, "h3") {
		bad("tls.alpn", strings.Join(p.TLS.ALPN, ","), "http3 needs h3 in the ALPN list")
	}
	if p.CloseReset {
		bad("close", "rst", "a QUIC connection has no TCP reset and leaves no TIME_WAIT: use the default (fin), which closes with CONNECTION_CLOSE")
	}
	return errs
}

// validateEarlyData checks tls.early_data (0-RTT): HTTP/3 only (the TCP
// clients send no early data), with session resumption (0-RTT needs a
// session to offer), and for GET and HEAD only, the methods RFC 8470
// section 2.1 and RFC 9114 section 10.9 let go in replayable early data
// (quic-go's http3 package allows the same two).
func (p *Plan) validateEarlyData(bad func(field, value, allowed string)) {
	if !p.TLS.EarlyData {
		return
	}
	if p.Protocol != H3 {
		bad("tls.early_data", "true", "0-RTT early data is sent only over HTTP/3 (http3): add it or leave early data off")
	}
	if !p.TLS.Resume {
		bad("tls.early_data", "true", "0-RTT needs a session to resume: add tls.resume (or tls.resume_ratio)")
	}
	methods := []string{p.Method}
	for _, r := range p.Mix {
		methods = append(methods, r.Method)
	}
	for _, m := range methods {
		if m != "" && m != "GET" && m != "HEAD" {
			bad("tls.early_data", "true", fmt.Sprintf("early data can be replayed (RFC 8470 section 2.1): only GET and HEAD requests, not %s", m))
			return
		}
	}
}

package plan

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// validateHTTP3 checks a plan of protocol H3 (HTTP/3 over QUIC, RFC 9114
// and RFC 9000) against what QUIC allows and what the engine's HTTP/3
// client does: https only (QUIC always carries TLS 1.3, RFC 9001), no TCP
// options.
func (p *Plan) validateHTTP3(t Target, parsed bool) []error {
	if p.Protocol != H3 {
		return nil
	}
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
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

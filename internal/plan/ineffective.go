package plan

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
)

// Combinations of options of which one would do nothing are refused, as TLS
// options with an http:// URL are (coordctl), so that a run never seems to
// have tested what it did not: the error names the option that does
// nothing and why.

// ineffective returns the TLS options that the others make useless: cipher
// suites when TLS 1.3 is the lowest version (crypto/tls does not configure
// TLS 1.3 suites: RFC 8446 suites are all offered), X25519MLKEM768 when
// TLS 1.2 is the highest (a TLS 1.3 group, never offered below it), a CA
// when verification is off. minV and maxV are the parsed versions, 0 when
// unset (defaults 1.2 and 1.3).
func (t *TLS) ineffective(minV, maxV uint16) []error {
	var errs []error
	if minV == tls.VersionTLS13 && len(t.Ciphers) > 0 {
		errs = append(errs, &FieldError{"tls.ciphers", strings.Join(t.Ciphers, ","),
			"cipher suites do nothing when TLS 1.3 is the lowest version: TLS 1.3 suites are not configurable (Go offers all of them); allow TLS 1.2 or drop the suites"})
	}
	if maxV != 0 && maxV < tls.VersionTLS13 {
		for _, c := range t.Curves {
			if id, ok := Curve(c); ok && id == tls.X25519MLKEM768 {
				errs = append(errs, &FieldError{"tls.curves", c,
					fmt.Sprintf("X25519MLKEM768 is a TLS 1.3 group, never offered when TLS %s is the highest version; allow TLS 1.3 or drop it", t.MaxVersion)})
			}
		}
	}
	if t.Insecure && len(t.CAPEM) > 0 {
		errs = append(errs, &FieldError{"tls.ca_file", "", "a CA does nothing when certificate verification is off (insecure, --insecure): drop one of them"})
	}
	return errs
}

// ineffectiveLoad returns the plan's options outside TLS that the others
// make useless: a resolver when the address dialled is an IP literal
// (nothing is resolved), and concurrent HTTP/2 streams with no_keepalive
// (one request per connection leaves no stream to share). t is the parsed
// URL.
func (p *Plan) ineffectiveLoad(t Target) []error {
	var errs []error
	if p.Resolver != "" {
		host := t.Host
		if h, _, err := net.SplitHostPort(p.ConnectTo); err == nil {
			host = h
		}
		if net.ParseIP(host) != nil {
			errs = append(errs, &FieldError{"resolver", fmt.Sprintf("%q", p.Resolver),
				fmt.Sprintf("nothing to resolve: the address dialled, %s, is an IP address; drop the resolver or give a host name", host)})
		}
	}
	if p.NoKeepAlive && p.MaxStreams > 1 {
		errs = append(errs, &FieldError{"max_streams", fmt.Sprint(p.MaxStreams),
			"concurrent streams do nothing with no_keepalive (--no-keepalive): each connection carries one request; drop one of them"})
	}
	return errs
}

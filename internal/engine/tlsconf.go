package engine

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/phalanxload/phalanx/internal/plan"
)

// tlsConfig builds the client TLS configuration of a valid plan.
// Verification is on unless the plan says Insecure. The server name is the
// plan's SNI override or the URL's host; crypto/tls sends no SNI for an IP
// literal (RFC 6066 section 3) and verifies it against IP SANs.
func tlsConfig(p plan.Plan, t plan.Target) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		MaxVersion:         tls.VersionTLS13,
		InsecureSkipVerify: p.TLS.Insecure, //nolint:gosec // the user asked for it
		ServerName:         t.Host,
		NextProtos:         []string{"http/1.1"},
	}
	switch p.Protocol {
	case plan.H2:
		c.NextProtos = []string{"h2"}
	case plan.H3:
		c.NextProtos = []string{"h3"}   // RFC 9114 section 3.1
		c.MinVersion = tls.VersionTLS13 // RFC 9001 section 4.2
	}
	if len(p.TLS.ALPN) > 0 {
		c.NextProtos = p.TLS.ALPN
	}
	if p.TLS.ServerName != "" {
		c.ServerName = p.TLS.ServerName
	}
	if p.TLS.MinVersion != "" {
		c.MinVersion, _ = plan.TLSVersion(p.TLS.MinVersion)
	}
	if p.TLS.MaxVersion != "" {
		c.MaxVersion, _ = plan.TLSVersion(p.TLS.MaxVersion)
	}
	for _, name := range p.TLS.Ciphers {
		id, _ := plan.CipherSuite(name)
		c.CipherSuites = append(c.CipherSuites, id)
	}
	for _, name := range p.TLS.Curves {
		id, _ := plan.Curve(name)
		c.CurvePreferences = append(c.CurvePreferences, id)
	}
	if len(p.TLS.CAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(p.TLS.CAPEM) {
			return nil, errors.New("tls: CA bundle holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	if len(p.TLS.CertPEM) > 0 {
		cert, err := tls.X509KeyPair(p.TLS.CertPEM, p.TLS.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// describeTLS fills ci's negotiated parameters.
func describeTLS(ci *connInfo, st tls.ConnectionState) {
	ci.tls = true
	ci.resumed = st.DidResume
	ci.version = tls.VersionName(st.Version)
	ci.cipher = tls.CipherSuiteName(st.CipherSuite)
	if st.CurveID != 0 {
		ci.group = groupName(st.CurveID)
	}
	ci.alpn = st.NegotiatedProtocol
}

// groupName names a key exchange group as --curves and tls.curves accept it
// (plan.Curve): P-256, P-384, P-521, X25519, X25519MLKEM768; a group
// without such a name gets crypto/tls's.
func groupName(id tls.CurveID) string {
	switch id {
	case tls.CurveP256:
		return "P-256"
	case tls.CurveP384:
		return "P-384"
	case tls.CurveP521:
		return "P-521"
	}
	return id.String()
}

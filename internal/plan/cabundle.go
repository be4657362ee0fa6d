package plan

import (
	"crypto/x509"
	"errors"
)

// CheckCABundle returns an error when b, the contents of a CA file
// (--cacert, tls.ca_file), holds no PEM certificate that parses: the rule
// of crypto/x509's CertPool.AppendCertsFromPEM, which the engine applies
// later (internal/engine's tlsConfig), checked up front so that the
// command line or plan file is refused before any agent starts.
func CheckCABundle(b []byte) error {
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return errors.New("holds no PEM certificate (want CA certificates as -----BEGIN CERTIFICATE----- blocks)")
	}
	return nil
}

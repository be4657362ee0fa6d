package engine

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// verifyHint returns what to do about a TLS handshake error that is a
// failed certificate verification, to append to its message ("" for any
// other error): trust the server's CA (coordctl run --cacert FILE, the plan
// file's tls.ca_file), verify the name the certificate is for (--sni), or,
// for a throwaway certificate, skip verification (--insecure, tls.insecure).
// Verification stays on by default (README, How it measures).
func verifyHint(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknown):
		return " (the server's certificate is not signed by a CA this agent trusts: trust its CA with --cacert FILE, tls.ca_file in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &hostname):
		return " (the server's certificate is not for the name verified: give the name it is for with --sni NAME, tls.sni in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return " (the server's certificate has expired or is not valid yet: renew it, check the clocks, or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &verify):
		return " (trust the server's CA with --cacert FILE, tls.ca_file in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	}
	return ""
}

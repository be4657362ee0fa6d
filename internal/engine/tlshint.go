package engine

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/phalanxload/phalanx/internal/plan"
)

// verifyHint returns what to do about a TLS handshake error that is a
// failed certificate verification, to append to its message ("" for any
// other error): trust the server's CA (coordctl run --cacert FILE, the plan
// file's tls.ca_file), verify the name the certificate is for (--sni), or,
// for a throwaway certificate, skip verification (--insecure, tls.insecure).
// When the plan trusts CA certificates of its own (t.CAPEM), the hint says
// that they do not sign the server's certificate either, naming their file
// (t.CAFile) when they came from one. Verification stays on by default
// (README, How it measures).
func verifyHint(err error, t plan.TLS) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	trusted := "" // the CAs besides the system's, when the plan gives some
	switch {
	case t.CAFile != "":
		trusted = fmt.Sprintf("the CA file given, %s (--cacert, tls.ca_file)", t.CAFile)
	case len(t.CAPEM) > 0:
		trusted = "the CA certificates the plan gives"
	}
	switch {
	case errors.As(err, &unknown) && trusted != "":
		return fmt.Sprintf(" (the server's certificate is signed neither by the system's CAs nor by %s: give the CA that signed it; or, for a throwaway certificate, skip verification with --insecure)", trusted)
	case errors.As(err, &unknown):
		return " (the server's certificate is not signed by a CA this agent trusts: trust its CA with --cacert FILE, tls.ca_file in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &hostname):
		return " (the server's certificate is not for the name verified: give the name it is for with --sni NAME, tls.sni in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return " (the server's certificate has expired or is not valid yet: renew it, check the clocks, or, for a throwaway certificate, skip verification with --insecure)"
	case errors.As(err, &verify) && trusted != "":
		return fmt.Sprintf(" (verified against the system's CAs and %s: give the CA that signed the server's certificate; or, for a throwaway certificate, skip verification with --insecure)", trusted)
	case errors.As(err, &verify):
		return " (trust the server's CA with --cacert FILE, tls.ca_file in a plan file; or, for a throwaway certificate, skip verification with --insecure)"
	}
	return ""
}

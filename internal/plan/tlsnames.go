package plan

import (
	"crypto/tls"
	"fmt"
	"sort"
	"strings"
)

// tlsVersions maps accepted version names to crypto/tls constants.
var tlsVersions = map[string]uint16{
	"1.0": tls.VersionTLS10, "1.1": tls.VersionTLS11, "1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13,
}

// TLSVersion returns the crypto/tls constant for "1.0" to "1.3" (also
// accepted: "TLSv1.2", "tls1.2").
func TLSVersion(name string) (uint16, bool) {
	n := strings.ToLower(name)
	n = strings.TrimPrefix(strings.TrimPrefix(n, "tlsv"), "tls")
	v, ok := tlsVersions[n]
	return v, ok
}

// opensslCipherNames maps OpenSSL's names of the suites crypto/tls
// implements to their IANA names (OpenSSL's ciphers(1) mapping table).
var opensslCipherNames = map[string]string{
	"RC4-SHA":                       "TLS_RSA_WITH_RC4_128_SHA",
	"DES-CBC3-SHA":                  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
	"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
	"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	"AES128-SHA256":                 "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
	"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-RC4-SHA":           "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-RC4-SHA":             "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
	"ECDHE-RSA-DES-CBC3-SHA":        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-ECDSA-AES128-SHA256":     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-SHA256":       "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
}

// CipherSuite returns the ID of a TLS 1.0-1.2 cipher suite named by its
// IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) or OpenSSL name
// (ECDHE-RSA-AES128-GCM-SHA256), case-insensitively.
func CipherSuite(name string) (uint16, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if iana, ok := opensslCipherNames[n]; ok {
		n = iana
	}
	for _, list := range [][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, cs := range list {
			if cs.Name == n && !tls13Only(cs) {
				return cs.ID, true
			}
		}
	}
	return 0, false
}

func tls13Only(cs *tls.CipherSuite) bool {
	return len(cs.SupportedVersions) == 1 && cs.SupportedVersions[0] == tls.VersionTLS13
}

// cipherNames lists the accepted cipher names, for error messages.
func cipherNames() []string {
	var out []string
	for o := range opensslCipherNames {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// curves maps accepted group names to crypto/tls IDs.
var curves = map[string]tls.CurveID{
	"X25519": tls.X25519, "P-256": tls.CurveP256, "P-384": tls.CurveP384, "P-521": tls.CurveP521,
	"X25519MLKEM768": tls.X25519MLKEM768,
}

// Curve returns the ID of a key exchange group: X25519, P-256 (also
// prime256v1, secp256r1), P-384 (secp384r1), P-521 (secp521r1),
// X25519MLKEM768; case-insensitive.
func Curve(name string) (tls.CurveID, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	switch n {
	case "PRIME256V1", "SECP256R1", "P256":
		n = "P-256"
	case "SECP384R1", "P384":
		n = "P-384"
	case "SECP521R1", "P521":
		n = "P-521"
	}
	id, ok := curves[n]
	return id, ok
}

// validate checks the TLS names and pairs.
func (t *TLS) validate(http2 bool) []error {
	var errs []error
	var minV, maxV uint16
	if t.MinVersion != "" {
		v, ok := TLSVersion(t.MinVersion)
		if !ok {
			errs = append(errs, &FieldError{"tls.min_version", fmt.Sprintf("%q", t.MinVersion), "want 1.0, 1.1, 1.2 or 1.3"})
		}
		minV = v
	}
	if t.MaxVersion != "" {
		v, ok := TLSVersion(t.MaxVersion)
		if !ok {
			errs = append(errs, &FieldError{"tls.max_version", fmt.Sprintf("%q", t.MaxVersion), "want 1.0, 1.1, 1.2 or 1.3"})
		}
		maxV = v
	}
	if minV != 0 && maxV != 0 && minV > maxV {
		errs = append(errs, &FieldError{"tls.min_version", t.MinVersion, "want at most tls.max_version " + t.MaxVersion})
	}
	for _, c := range t.Ciphers {
		if _, ok := CipherSuite(c); !ok {
			errs = append(errs, &FieldError{"tls.ciphers", fmt.Sprintf("%q", c), "want a TLS 1.2 suite by IANA or OpenSSL name: " + strings.Join(cipherNames(), ", ")})
		}
	}
	for _, c := range t.Curves {
		if _, ok := Curve(c); !ok {
			errs = append(errs, &FieldError{"tls.curves", fmt.Sprintf("%q", c), "want X25519, P-256, P-384, P-521 or X25519MLKEM768"})
		}
	}
	errs = append(errs, t.ineffective(minV, maxV)...)
	if (len(t.CertPEM) == 0) != (len(t.KeyPEM) == 0) {
		errs = append(errs, &FieldError{"tls.cert", "", "a client certificate needs both cert and key"})
	} else if len(t.CertPEM) > 0 {
		if _, err := tls.X509KeyPair(t.CertPEM, t.KeyPEM); err != nil {
			errs = append(errs, &FieldError{"tls.cert", "", "bad client certificate or key: " + err.Error()})
		}
	}
	for _, a := range t.ALPN {
		if a == "" || len(a) > 255 {
			errs = append(errs, &FieldError{"tls.alpn", fmt.Sprintf("%q", a), "want protocol IDs such as h2, http/1.1"})
		}
	}
	if http2 && len(t.ALPN) > 0 && !contains(t.ALPN, "h2") {
		errs = append(errs, &FieldError{"tls.alpn", strings.Join(t.ALPN, ","), "http2 needs h2 in the ALPN list"})
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

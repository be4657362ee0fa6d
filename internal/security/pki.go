package security

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// Certificate lifetimes, as Consul's `consul tls ca create -days` (1825)
// and `consul tls cert create -days` (365) defaults.
const (
	// DefaultCALifetime is a CA's lifetime: 5 years (1825 days).
	DefaultCALifetime = 1825 * 24 * time.Hour
	// DefaultCertLifetime is a leaf certificate's lifetime: 1 year (365
	// days), never past its CA's end.
	DefaultCertLifetime = 365 * 24 * time.Hour
	// NotBeforeSkew is how far before its creation a certificate becomes
	// valid, for hosts whose clocks are a little behind.
	NotBeforeSkew = time.Hour
)

// CA is a cluster certificate authority: its certificate and signing key.
// Every certificate of one cluster is issued by one CA.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert as one PEM "CERTIFICATE" block (the --tls-ca file).
	CertPEM []byte
	key     crypto.Signer
}

// NewCA makes a self-signed CA with an ECDSA P-256 key, valid from
// NotBeforeSkew ago for lifetime (zero or negative: DefaultCALifetime).
// Its common name is "Phalanx CA " and 8 hex digits of its serial number,
// so that two clusters' CAs are told apart.
func NewCA(lifetime time.Duration) (*CA, error) {
	if lifetime <= 0 {
		lifetime = DefaultCALifetime
	}
	now := time.Now()
	cert, key, err := tlsgen.NewCA("Phalanx", "Phalanx CA", now.Add(-NotBeforeSkew), now.Add(lifetime))
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM(cert.Raw), key: key}, nil
}

// ParseCA reads a CA from its certificate and key PEM (as NewCA's CertPEM
// and KeyPEM). It fails when the certificate is no CA or the key is not
// its key.
func ParseCA(certPEMBytes, keyPEMBytes []byte) (*CA, error) {
	cert, err := parseCert(certPEMBytes)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certificate %q is not a CA", cert.Subject.CommonName)
	}
	key, err := parseKey(keyPEMBytes)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the key is not the CA certificate's key")
	}
	return &CA{Cert: cert, CertPEM: certPEM(cert.Raw), key: key}, nil
}

// KeyPEM returns the CA's private key as one PEM "PRIVATE KEY" block
// (PKCS #8). It is the cluster's most sensitive secret: keep it off the
// cluster's hosts.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// CertRequest says what certificate Issue makes.
type CertRequest struct {
	// Role is the certificate's role (required): its DNS SAN role name
	// and its extended key usage (Role.ExtKeyUsage).
	Role Role
	// Name is the holder's name, the certificate's common name (required;
	// letters, digits, '.', '_' and '-'), e.g. the agent's --name.
	Name string
	// DNSNames are DNS SANs besides the role name (for other tools that
	// verify the host name); a role name of the cluster is refused.
	DNSNames []string
	// IPs are IP SANs (for the same tools).
	IPs []net.IP
	// Lifetime is how long the certificate is valid. Zero or negative:
	// DefaultCertLifetime. It never outlives the CA.
	Lifetime time.Duration
}

// nameRE is what a certificate holder's name may be: it becomes part of
// file names.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidName returns an error unless name may name a certificate's holder
// (letters, digits, '.', '_' and '-', not starting with a punctuation
// mark).
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("name %q: want letters, digits, '.', '_' and '-' (not first)", name)
	}
	return nil
}

// Issue makes a certificate for req signed by ca, with a new ECDSA P-256
// key, and returns both as PEM: the certificate as one "CERTIFICATE" block,
// the key as one "PRIVATE KEY" block (PKCS #8). Its validity starts
// NotBeforeSkew ago and ends after req.Lifetime or at the CA's end,
// whichever comes first.
func (ca *CA) Issue(req CertRequest) (certPEMBytes, keyPEMBytes []byte, err error) {
	if req.Role == RoleNone || req.Role.ExtKeyUsage() == nil {
		return nil, nil, fmt.Errorf("role %v: want agent, coordinator or client", req.Role)
	}
	if err := ValidName(req.Name); err != nil {
		return nil, nil, err
	}
	dns := []string{req.Role.DNSName()}
	for _, d := range req.DNSNames {
		d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		if d == "" || strings.ContainsAny(d, " \t/:") {
			return nil, nil, fmt.Errorf("DNS name %q is not a host name", d)
		}
		if d == RoleDomain || strings.HasSuffix(d, "."+RoleDomain) {
			return nil, nil, fmt.Errorf("DNS name %q: names under .%s are the cluster's role names, set by --role", d, RoleDomain)
		}
		dns = append(dns, d)
	}
	lifetime := req.Lifetime
	if lifetime <= 0 {
		lifetime = DefaultCertLifetime
	}
	now := time.Now()
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	der, key, err := tlsgen.NewLeaf(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Phalanx"}, OrganizationalUnit: []string{req.Role.String()}, CommonName: req.Name},
		NotBefore:   now.Add(-NotBeforeSkew),
		NotAfter:    notAfter,
		ExtKeyUsage: req.Role.ExtKeyUsage(),
		DNSNames:    dns,
		IPAddresses: req.IPs,
	}, ca.Cert, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM(der), kp, nil
}

// WriteFile writes data to path with mode 0600. An existing file is an
// error unless force, which truncates it and resets its mode to 0600.
func WriteFile(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists (--force overwrites it)", path)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseCert returns the first certificate of PEM data.
func parseCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// parseKey returns the private key of PEM data: PKCS #8 ("PRIVATE KEY"),
// SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY"). Its errors
// never quote the key.
func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM private key block")
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, errors.New("malformed private key")
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", k)
		}
		return s, nil
	}
}

// ParseCertificate returns the first certificate of PEM data.
func ParseCertificate(data []byte) (*x509.Certificate, error) { return parseCert(data) }

package tlsgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names used by Bundle.WriteFiles inside the target directory.
const (
	// CAFileName holds the CA certificate PEM (Bundle.CAPEM).
	CAFileName = "ca.pem"
	// CertFileName holds the leaf certificate PEM (Bundle.CertPEM).
	CertFileName = "cert.pem"
	// KeyFileName holds the leaf private key PEM (Bundle.KeyPEM), mode 0600.
	KeyFileName = "key.pem"
)

// Validity window of generated certificates, relative to the time New runs.
// The CA and the leaf share the same window.
const (
	// NotBeforeSkew is how far in the past certificates become valid, to
	// tolerate small clock differences between processes.
	NotBeforeSkew = time.Hour
	// Lifetime is how long after generation certificates stay valid.
	Lifetime = 24 * time.Hour
)

// DefaultHosts returns the leaf subject alternative names New uses when it
// is called without hosts: localhost, app.test, svc.test, 127.0.0.1 and ::1.
// The returned slice is a fresh copy the caller may modify.
func DefaultHosts() []string {
	return []string{"localhost", "app.test", "svc.test", "127.0.0.1", "::1"}
}

// Bundle is a generated test CA plus one leaf certificate signed by it.
//
// All PEM fields hold exactly one PEM block. The leaf key is ECDSA P-256,
// encoded as PKCS #8 ("PRIVATE KEY"), which Go, OpenSSL and NGINX all read.
type Bundle struct {
	// CAPEM is the self-signed CA certificate ("CERTIFICATE" block).
	// Clients trust this.
	CAPEM []byte
	// CertPEM is the leaf certificate ("CERTIFICATE" block), signed by the CA.
	CertPEM []byte
	// KeyPEM is the leaf private key ("PRIVATE KEY" block, PKCS #8).
	KeyPEM []byte
	// Cert is the leaf as a ready-to-serve tls.Certificate. Its chain holds
	// only the leaf (the CA is the trust anchor and need not be sent), and
	// Cert.Leaf is populated.
	Cert tls.Certificate
	// CAPool is a fresh pool containing only the CA certificate.
	CAPool *x509.CertPool
}

// New generates a test CA and a leaf certificate for hosts.
//
// Each host that parses as an IP address (optionally in brackets, as in
// "[::1]") becomes an IP SAN; every other host becomes a DNS SAN, in the
// given order, with duplicates dropped. The leaf's common name is the first
// host. With no hosts, DefaultHosts is used. The leaf is valid for server and
// client authentication from NotBeforeSkew before now to Lifetime after now.
//
// New returns an error if a host is empty or contains whitespace, or if key
// generation or signing fails.
func New(hosts ...string) (*Bundle, error) {
	if len(hosts) == 0 {
		hosts = DefaultHosts()
	}
	var (
		dnsNames []string
		ips      []net.IP
		seen     = make(map[string]bool, len(hosts))
	)
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, " \t\r\n") {
			return nil, fmt.Errorf("tlsgen: invalid host %q", h)
		}
		bare := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if ip := net.ParseIP(bare); ip != nil {
			key := "ip:" + ip.String()
			if !seen[key] {
				seen[key] = true
				ips = append(ips, ip)
			}
			continue
		}
		key := "dns:" + strings.ToLower(h)
		if !seen[key] {
			seen[key] = true
			dnsNames = append(dnsNames, h)
		}
	}

	now := time.Now()
	notBefore, notAfter := now.Add(-NotBeforeSkew), now.Add(Lifetime)
	caCert, caKey, err := NewCA("Phalanx test", "Phalanx Test CA", notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	caDER := caCert.Raw
	leafDER, leafKey, err := NewLeaf(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Phalanx test"}, CommonName: hosts[0]},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, caCert, caKey)
	if err != nil {
		return nil, err
	}
	leafCert, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: parse leaf certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: encode leaf key: %w", err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &Bundle{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert: tls.Certificate{
			Certificate: [][]byte{leafDER},
			PrivateKey:  leafKey,
			Leaf:        leafCert,
		},
		CAPool: pool,
	}, nil
}

// NewCA makes a self-signed CA with a new ECDSA P-256 key, valid from
// notBefore to notAfter, for signing leaves only (path length 0). Its
// subject is organization org and common name commonName followed by a space
// and 8 hex digits of its random serial number, so that two CAs are told
// apart. The cluster's CA (internal/security) is made here too.
func NewCA(org, commonName string, notBefore, notAfter time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsgen: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{org}, CommonName: commonName + " " + hex.EncodeToString(serial.Bytes()[:4])},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsgen: sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsgen: parse CA certificate: %w", err)
	}
	return cert, key, nil
}

// NewLeaf makes a new ECDSA P-256 key and a leaf certificate of tmpl for
// it, signed by ca with caKey: tmpl gives the subject, validity, names and
// extended key usage; NewLeaf sets a random serial number, the digital
// signature key usage and basic constraints (not a CA). It returns the
// certificate's DER and the key.
func NewLeaf(tmpl *x509.Certificate, ca *x509.Certificate, caKey crypto.Signer) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsgen: generate leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	t := *tmpl
	t.SerialNumber = serial
	t.KeyUsage = x509.KeyUsageDigitalSignature
	t.BasicConstraintsValid = true
	t.IsCA = false
	der, err := x509.CreateCertificate(rand.Reader, &t, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsgen: sign leaf certificate: %w", err)
	}
	return der, key, nil
}

// randomSerial returns a random positive 128-bit certificate serial number
// (RFC 5280 4.1.2.2: positive, at most 20 octets).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never zero
}

// ClientConfig returns a new TLS client configuration that trusts only the
// bundle's CA, with TLS 1.2 as the minimum version. ServerName is left empty
// so net/http and tls.Dial derive it from the address being dialled.
func (b *Bundle) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: b.CAPool, MinVersion: tls.VersionTLS12}
}

// ServerConfig returns a new TLS server configuration serving the bundle's
// leaf certificate, with TLS 1.2 as the minimum version.
func (b *Bundle) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{b.Cert}, MinVersion: tls.VersionTLS12}
}

// WriteFiles writes the CA certificate, leaf certificate and leaf key as PEM
// files named CAFileName, CertFileName and KeyFileName into dir, which must
// already exist. Certificates are written with mode 0644 and the key with
// mode 0600; existing files are overwritten and their mode reset. It returns
// the three paths, each filepath.Join(dir, name).
func (b *Bundle) WriteFiles(dir string) (caFile, certFile, keyFile string, err error) {
	if b == nil || len(b.CAPEM) == 0 || len(b.CertPEM) == 0 || len(b.KeyPEM) == 0 {
		return "", "", "", errors.New("tlsgen: write files: bundle is empty")
	}
	caFile = filepath.Join(dir, CAFileName)
	certFile = filepath.Join(dir, CertFileName)
	keyFile = filepath.Join(dir, KeyFileName)
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{keyFile, b.KeyPEM, 0o600},
		{caFile, b.CAPEM, 0o644},
		{certFile, b.CertPEM, 0o644},
	} {
		if err := writeFile(f.path, f.data, f.mode); err != nil {
			return "", "", "", err
		}
	}
	return caFile, certFile, keyFile, nil
}

// writeFile writes data to path and forces mode even if the file existed
// (os.WriteFile only applies the mode on creation).
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("tlsgen: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return fmt.Errorf("tlsgen: chmod %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("tlsgen: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tlsgen: close %s: %w", path, err)
	}
	return nil
}

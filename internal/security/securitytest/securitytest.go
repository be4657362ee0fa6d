// Package securitytest makes a cluster CA and role certificates for tests,
// in memory or as files in the test's temporary directory, the dial
// credentials of rogue clients, and a log sink to assert refusals on.
package securitytest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/phalanxload/phalanx/internal/security"
)

// PKI is a test cluster's CA.
type PKI struct {
	// CA signs every certificate of the PKI.
	CA *security.CA
}

// New makes a PKI with a fresh CA; it fails the test on error.
func New(t testing.TB) *PKI {
	t.Helper()
	ca, err := security.NewCA(0)
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca}
}

// Issue returns a certificate and key (PEM) of role for name.
func (p *PKI) Issue(t testing.TB, role security.Role, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := p.CA.Issue(security.CertRequest{Role: role, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// Config returns a mutual-TLS Config of role with a new certificate named
// after the role.
func (p *PKI) Config(t testing.TB, role security.Role) security.Config {
	t.Helper()
	c, k := p.Issue(t, role, role.String())
	cfg, err := security.NewTLS(role, p.CA.CertPEM, c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Files writes the CA certificate and a new certificate and key of role for
// name into a temporary directory of t, and returns their paths.
func (p *PKI) Files(t testing.TB, role security.Role, name string) security.Files {
	t.Helper()
	dir := t.TempDir()
	c, k := p.Issue(t, role, name)
	f := security.Files{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, role.String()+"-"+name+".pem"),
		Key:  filepath.Join(dir, role.String()+"-"+name+"-key.pem"),
	}
	for path, data := range map[string][]byte{f.CA: p.CA.CertPEM, f.Cert: c, f.Key: k} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Dial returns gRPC dial credentials for a client that presents certPEM and
// keyPEM (no certificate when certPEM is nil), trusts only pool and expects
// a server of role: a rogue client, where the certificate is another
// role's or another CA's.
func Dial(t testing.TB, certPEM, keyPEM []byte, pool *x509.CertPool, role security.Role) grpc.DialOption {
	t.Helper()
	cfg := &tls.Config{RootCAs: pool, ServerName: role.DNSName(), MinVersion: tls.VersionTLS13}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// Pool returns a pool holding only the PKI's CA.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA.Cert)
	return pool
}

// Log is a goroutine-safe log sink for a test's slog handler, to assert
// on the lines a daemon logged (refusals, warnings).
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the lines logged so far that hold every part.
func (l *Log) Lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

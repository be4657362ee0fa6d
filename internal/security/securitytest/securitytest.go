// Package securitytest makes a cluster CA and role certificates for tests,
// in memory or as files in the test's temporary directory.
package securitytest

import (
	"os"
	"path/filepath"
	"testing"

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

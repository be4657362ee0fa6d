package tlsgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// serveTLS accepts connections on 127.0.0.1 with cfg, completes the
// handshake and writes "ok" on each. It returns the listener address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte("ok")) // drives the handshake; fails if the client rejects us
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr with cfg (ServerName overridden) and returns what
// the server wrote.
func dial(addr, serverName string, cfg *tls.Config) (string, error) {
	cfg.ServerName = serverName
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestDefaultBundleVerifiesOverTLS(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	addr := serveTLS(t, b.ServerConfig())

	for _, name := range []string{"localhost", "127.0.0.1", "app.test", "svc.test"} {
		got, err := dial(addr, name, b.ClientConfig())
		if err != nil {
			t.Errorf("dial with ServerName %q: %v", name, err)
			continue
		}
		if got != "ok" {
			t.Errorf("ServerName %q: read %q, want %q", name, got, "ok")
		}
	}

	_, err = dial(addr, "evil.example", b.ClientConfig())
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) {
		t.Fatalf("dial with ServerName not in SANs: err = %v, want x509.HostnameError", err)
	}

	// An unrelated CA must not be accepted: trust is rooted in this bundle's CA.
	other, err := New()
	if err != nil {
		t.Fatalf("New (other): %v", err)
	}
	_, err = dial(addr, "localhost", other.ClientConfig())
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("dial trusting another CA: err = %v, want x509.UnknownAuthorityError", err)
	}
}

func TestLeafIsSignedByCA(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	leaf, ca := parsePEMCert(t, b.CertPEM), parsePEMCert(t, b.CAPEM)
	if !ca.IsCA || leaf.IsCA {
		t.Fatalf("IsCA: ca=%v leaf=%v, want true/false", ca.IsCA, leaf.IsCA)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Fatalf("leaf not signed by CA: %v", err)
	}
	if !leaf.Equal(b.Cert.Leaf) {
		t.Fatal("Cert.Leaf differs from CertPEM")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca2pool(ca), DNSName: "localhost"}); err != nil {
		t.Fatalf("verify against CA: %v", err)
	}
	if ipv6 := slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv6loopback) }); !ipv6 {
		t.Errorf("IP SANs %v lack ::1", leaf.IPAddresses)
	}
	if got, want := leaf.DNSNames, []string{"localhost", "app.test", "svc.test"}; !slices.Equal(got, want) {
		t.Errorf("DNS SANs = %v, want %v", got, want)
	}
	now := time.Now()
	if !leaf.NotBefore.Before(now.Add(-50*time.Minute)) || leaf.NotAfter.Before(now.Add(23*time.Hour)) || leaf.NotAfter.After(now.Add(25*time.Hour)) {
		t.Errorf("validity %v..%v not ~now-1h..now+24h", leaf.NotBefore, leaf.NotAfter)
	}
	if k, ok := b.Cert.PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("Cert.PrivateKey is %T, want a P-256 *ecdsa.PrivateKey", b.Cert.PrivateKey)
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithms leaf=%v ca=%v, want ECDSA", leaf.PublicKeyAlgorithm, ca.PublicKeyAlgorithm)
	}
	if _, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM); err != nil {
		t.Fatalf("CertPEM/KeyPEM do not form a key pair: %v", err)
	}
}

func ca2pool(ca *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}

func TestCustomHosts(t *testing.T) {
	b, err := New("example.test", "10.1.2.3", "[fe80::1]", "EXAMPLE.test", "10.1.2.3")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	leaf := b.Cert.Leaf
	if got := leaf.DNSNames; !slices.Equal(got, []string{"example.test"}) {
		t.Errorf("DNS SANs = %v, want [example.test] (deduplicated case-insensitively)", got)
	}
	if len(leaf.IPAddresses) != 2 || !leaf.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) || !leaf.IPAddresses[1].Equal(net.ParseIP("fe80::1")) {
		t.Errorf("IP SANs = %v, want [10.1.2.3 fe80::1]", leaf.IPAddresses)
	}
	if leaf.Subject.CommonName != "example.test" {
		t.Errorf("CN = %q", leaf.Subject.CommonName)
	}
	if err := leaf.VerifyHostname("localhost"); err == nil {
		t.Error("custom-host leaf verified for localhost")
	}

	for _, bad := range []string{"", "a b"} {
		if _, err := New("ok.test", bad); err == nil {
			t.Errorf("New(%q) succeeded, want error", bad)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	dir := t.TempDir()
	// A pre-existing, world-readable key file must end up 0600.
	if err := os.WriteFile(filepath.Join(dir, KeyFileName), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile, err := b.WriteFiles(dir)
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	for _, f := range []struct {
		path string
		want []byte
		mode os.FileMode
	}{{caFile, b.CAPEM, 0o644}, {certFile, b.CertPEM, 0o644}, {keyFile, b.KeyPEM, 0o600}} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(f.want) {
			t.Errorf("%s content mismatch", f.path)
		}
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s mode = %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("LoadX509KeyPair on written files: %v", err)
	}

	if _, _, _, err := b.WriteFiles(filepath.Join(dir, "missing")); err == nil {
		t.Error("WriteFiles into a missing directory succeeded")
	}
	if _, _, _, err := (&Bundle{}).WriteFiles(dir); err == nil {
		t.Error("WriteFiles of an empty bundle succeeded")
	}
}

func parsePEMCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	blk, rest := pem.Decode(data)
	if blk == nil || blk.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("not exactly one CERTIFICATE block: %q", data)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

package security_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/security"
)

func parse(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", p)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIssue: each role's certificate carries its role name and usage, an
// ECDSA P-256 key, the extra names, and the default lifetimes.
func TestIssue(t *testing.T) {
	ca, err := security.NewCA(0)
	if err != nil {
		t.Fatal(err)
	}
	if life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore) - security.NotBeforeSkew; life < security.DefaultCALifetime-time.Minute || life > security.DefaultCALifetime {
		t.Errorf("CA lifetime %v, want %v", life, security.DefaultCALifetime)
	}
	if !ca.Cert.IsCA || ca.Cert.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("CA: IsCA %v, key %T", ca.Cert.IsCA, ca.Cert.PublicKey)
	}
	wantEKU := map[security.Role][]x509.ExtKeyUsage{
		security.RoleAgent:       {x509.ExtKeyUsageServerAuth},
		security.RoleCoordinator: {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		security.RoleClient:      {x509.ExtKeyUsageClientAuth},
	}
	for _, role := range security.Roles {
		certPEM, keyPEM, err := ca.Issue(security.CertRequest{Role: role, Name: "n1", IPs: []net.IP{net.ParseIP("10.0.0.5")}, DNSNames: []string{"Host.Example."}})
		if err != nil {
			t.Fatal(err)
		}
		c := parse(t, certPEM)
		if got, err := security.RoleOf(c); got != role || err != nil {
			t.Errorf("RoleOf(%v certificate) = %v, %v", role, got, err)
		}
		if !slices.Equal(c.DNSNames, []string{role.DNSName(), "host.example"}) || len(c.IPAddresses) != 1 || c.Subject.CommonName != "n1" {
			t.Errorf("%v: names %v %v %q", role, c.DNSNames, c.IPAddresses, c.Subject.CommonName)
		}
		if !slices.Equal(c.ExtKeyUsage, wantEKU[role]) {
			t.Errorf("%v: ExtKeyUsage %v, want %v", role, c.ExtKeyUsage, wantEKU[role])
		}
		if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%v: key %T, want ECDSA P-256", role, c.PublicKey)
		}
		if life := c.NotAfter.Sub(c.NotBefore) - security.NotBeforeSkew; life < security.DefaultCertLifetime-time.Minute || life > security.DefaultCertLifetime {
			t.Errorf("%v: lifetime %v, want %v", role, life, security.DefaultCertLifetime)
		}
		if _, err := security.NewTLS(role, ca.CertPEM, certPEM, keyPEM); err != nil {
			t.Errorf("%v: NewTLS: %v", role, err)
		}
	}

	// A leaf never outlives its CA.
	short, err := security.NewCA(48 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := short.Issue(security.CertRequest{Role: security.RoleAgent, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if c := parse(t, certPEM); c.NotAfter.After(short.Cert.NotAfter) {
		t.Errorf("leaf ends %v, after its CA (%v)", c.NotAfter, short.Cert.NotAfter)
	}

	for _, bad := range []security.CertRequest{
		{Role: security.RoleNone, Name: "a"},
		{Role: security.RoleAgent, Name: ""},
		{Role: security.RoleAgent, Name: "../etc"},
		{Role: security.RoleAgent, Name: "a", DNSNames: []string{"coordinator.phalanx"}},
		{Role: security.RoleAgent, Name: "a", DNSNames: []string{"a b"}},
	} {
		if _, _, err := ca.Issue(bad); err == nil {
			t.Errorf("Issue(%+v): want an error", bad)
		}
	}
}

// TestParseCA: a CA round-trips through its PEM; a leaf or another key is
// refused.
func TestParseCA(t *testing.T) {
	ca, err := security.NewCA(0)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := security.ParseCA(ca.CertPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, leafKey, err := back.Issue(security.CertRequest{Role: security.RoleClient, Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := security.NewTLS(security.RoleClient, ca.CertPEM, certPEM, leafKey); err != nil {
		t.Errorf("certificate of the parsed CA: %v", err)
	}
	if _, err := security.ParseCA(certPEM, leafKey); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("ParseCA(leaf) = %v, want not a CA", err)
	}
	if _, err := security.ParseCA(ca.CertPEM, leafKey); err == nil || !strings.Contains(err.Error(), "not the CA certificate's key") {
		t.Errorf("ParseCA(other key) = %v", err)
	}
}

func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		dns  []string
		want string
	}{
		{[]string{"agent.phalanx", "client.phalanx"}, "several roles"},
		{[]string{"host.example"}, "no role"},
	} {
		if _, err := security.RoleOf(&x509.Certificate{DNSNames: c.dns}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RoleOf(%v) = %v, want %q", c.dns, err, c.want)
		}
	}
	if _, err := security.ParseRole("server"); err == nil || !strings.Contains(err.Error(), "agent, coordinator or client") {
		t.Errorf("ParseRole(server) = %v", err)
	}
	if r, err := security.ParseRole("Coordinator"); r != security.RoleCoordinator || err != nil {
		t.Errorf("ParseRole(Coordinator) = %v, %v", r, err)
	}
}

// TestWriteFile: files are 0600, an existing one is refused unless forced.
func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k.pem")
	if err := security.WriteFile(p, []byte("one"), false); err != nil {
		t.Fatal(err)
	}
	if err := security.WriteFile(p, []byte("two"), false); err == nil || !strings.Contains(err.Error(), "exists (--force overwrites it)") {
		t.Errorf("second write: %v, want refused", err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := security.WriteFile(p, []byte("three"), true); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if st.Mode().Perm() != 0o600 || string(data) != "three" {
		t.Errorf("forced write: mode %v, data %q; want 0600, three", st.Mode().Perm(), data)
	}
}

// TestExposure: a daemon on a network address refuses to start without
// mutual TLS unless --insecure-cluster, and then warns.
func TestExposure(t *testing.T) {
	local := []security.Listen{{Flag: "--grpc-addr", Addr: "127.0.0.1:7070", Gossip: false}, {Flag: "--gossip-addr", Addr: "[::1]:7946", Gossip: true}}
	exposed := []security.Listen{{Flag: "--grpc-addr", Addr: "127.0.0.1:7070", Gossip: false}, {Flag: "--gossip-addr", Addr: "0.0.0.0:7946", Gossip: true}}
	cases := []struct {
		name     string
		e        security.Exposure
		wantErr  string
		wantWarn string
	}{
		{"loopback", security.Exposure{Listen: local}, "", ""},
		{"localhost", security.Exposure{Listen: []security.Listen{{Flag: "--grpc-addr", Addr: "localhost:1", Gossip: false}}}, "", ""},
		{"exposed", security.Exposure{Listen: exposed}, "--gossip-addr 0.0.0.0:7946 is not a loopback address", ""},
		{"empty host", security.Exposure{Listen: []security.Listen{{Flag: "--gossip-addr", Addr: ":7946", Gossip: true}}}, "--gossip-addr :7946 is not a loopback", ""},
		{"exposed with TLS and a gossip key", security.Exposure{Listen: exposed, TLS: true, GossipKey: true}, "", ""},
		{"exposed gossip with TLS, no gossip key", security.Exposure{Listen: exposed, TLS: true}, "--gossip-addr 0.0.0.0:7946 is not a loopback address: a daemon on the network needs a gossip key for its gossip (--gossip-key-file", ""},
		{"exposed without TLS nor gossip key", security.Exposure{Listen: exposed}, "needs mutual TLS (--tls-ca, --tls-cert, --tls-key) and a gossip key for its gossip (--gossip-key-file", ""},
		{"exposed gRPC only, no gossip key", security.Exposure{Listen: []security.Listen{{Flag: "--grpc-addr", Addr: "0.0.0.0:7070", Gossip: false}, {Flag: "--gossip-addr", Addr: "127.0.0.1:7946", Gossip: true}}, TLS: true}, "", ""},
		{"exposed with TLS, insecure cluster, no gossip key", security.Exposure{Listen: exposed, TLS: true, InsecureCluster: true}, "", "insecure cluster (--insecure-cluster): gossip on --gossip-addr 0.0.0.0:7946 is unencrypted: anyone who reaches it may join the cluster and read its membership"},
		// gRPC on loopback, gossip on the network: the warning blames
		// each port for what it exposes, not gossip for plans.
		{"exposed gossip, insecure cluster, both missing", security.Exposure{Listen: exposed, InsecureCluster: true}, "",
			"--grpc-addr 127.0.0.1:7070 without mutual TLS: anyone who reaches --grpc-addr may run plans (it is loopback: anyone on this host); gossip on --gossip-addr 0.0.0.0:7946 is unencrypted"},
		{"exposed gRPC, insecure cluster", security.Exposure{Listen: []security.Listen{{Flag: "--grpc-addr", Addr: "0.0.0.0:7070"}, {Flag: "--gossip-addr", Addr: "127.0.0.1:7946", Gossip: true}}, InsecureCluster: true}, "",
			"insecure cluster (--insecure-cluster): --grpc-addr 0.0.0.0:7070 without mutual TLS: anyone who reaches --grpc-addr may run plans"},
		// With TLS, the error says what --insecure-cluster would allow: gossip only.
		{"exposed gossip with TLS, no key: what --insecure-cluster allows", security.Exposure{Listen: exposed, TLS: true}, "or --insecure-cluster to start anyway, and then gossip on --gossip-addr 0.0.0.0:7946 is unencrypted: anyone who reaches it may join the cluster and read its membership", ""},
		// The default gossip address says so, with the one-host fix.
		{"default gossip address", security.Exposure{Listen: []security.Listen{{Flag: "--grpc-addr", Addr: "127.0.0.1:17102"}, {Flag: "--gossip-addr", Addr: "0.0.0.0:7946", Gossip: true, Default: true}}},
			"--gossip-addr 0.0.0.0:7946 (the default) is not a loopback address: a daemon on the network needs mutual TLS (--tls-ca, --tls-cert, --tls-key) and a gossip key for its gossip (--gossip-key-file, made by coordctl keygen) (README \"Securing a cluster\"); on one host, give --gossip-addr 127.0.0.1:PORT, a port of its own per member, with --local (README \"On one machine\"); or --insecure-cluster", ""},
		{"seam", security.Exposure{Listen: local, Loopback: func(string) bool { return false }}, "--grpc-addr 127.0.0.1:7070 is not a loopback", ""},
		{"bad address", security.Exposure{Listen: []security.Listen{{Flag: "--grpc-addr", Addr: "nope", Gossip: false}}}, "--grpc-addr \"nope\"", ""},
	}
	for _, c := range cases {
		warn, err := c.e.Check()
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: Check() error %v, want %q", c.name, err, c.wantErr)
		}
		if c.wantErr != "" && err != nil && c.name == "exposed" && (!strings.Contains(err.Error(), "--tls-ca") || !strings.Contains(err.Error(), "--insecure-cluster")) {
			t.Errorf("%s: error %q does not say how to fix it", c.name, err)
		}
		if msg := fmt.Sprint(warn, err); strings.Contains(msg, "--gossip-addr 0.0.0.0:7946 without mutual TLS") || strings.Contains(msg, "unauthenticated") {
			t.Errorf("%s: %q blames gossip for plans or does not say what --insecure-cluster allows", c.name, msg)
		}
		if c.wantWarn == "" && warn != "" || c.wantWarn != "" && !strings.Contains(warn, c.wantWarn) {
			t.Errorf("%s: Check() warning %q, want %q", c.name, warn, c.wantWarn)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "::ffff:127.0.0.1": true, "LocalHost": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "198.18.0.1": false, "example.com": false} {
		if got := security.IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

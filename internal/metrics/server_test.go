package metrics

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

// serve runs s until the test ends.
func serve(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil {
			t.Errorf("metrics server: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestServerSafeDefault: without mutual TLS a /metrics address that is
// not loopback is refused, naming the flag and the fixes, unless
// --insecure-cluster, which serves it with a warning; on loopback it is
// plain HTTP.
func TestServerSafeDefault(t *testing.T) {
	d := NewDaemon(1, func() float64 { return 1 })
	if _, err := Listen("0.0.0.0:0", d.Registry, security.Config{}, quiet()); err == nil ||
		!strings.Contains(err.Error(), "--metrics-addr 0.0.0.0:0 is not a loopback address") || !strings.Contains(err.Error(), "--insecure-cluster") {
		t.Errorf("network address without TLS: %v", err)
	}
	log := &securitytest.Log{}
	s, err := Listen("0.0.0.0:0", d.Registry, security.Config{InsecureCluster: true}, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	if s.TLS() {
		t.Error("insecure cluster: served with TLS")
	}
	port := s.Addr()[strings.LastIndex(s.Addr(), ":"):]
	resp, err := http.Get("http://127.0.0.1" + port + Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "phalanx_gossip_members 1") {
		t.Errorf("GET %s: %s\n%s", Path, resp.Status, body)
	}
	if !strings.Contains(log.String(), "insecure cluster (--insecure-cluster): --metrics-addr 0.0.0.0:0 serves /metrics in plaintext") {
		t.Errorf("no warning logged: %s", log.String())
	}
}

// TestServerMutualTLS: with the daemon's mutual TLS, /metrics is HTTPS
// with the daemon's certificate and admits only a client certificate of
// the cluster's CA: none, another role's, or another CA's fails the
// handshake.
func TestServerMutualTLS(t *testing.T) {
	pki := securitytest.New(t)
	d := NewDaemon(1, func() float64 { return 1 })
	s, err := Listen("127.0.0.1:0", d.Registry, pki.Config(t, security.RoleAgent), quiet())
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	if !s.TLS() {
		t.Fatal("mutual TLS daemon: /metrics without TLS")
	}
	get := func(certPEM, keyPEM []byte) error {
		tc := &tls.Config{RootCAs: pki.Pool(), ServerName: security.RoleAgent.DNSName(), MinVersion: tls.VersionTLS13}
		if certPEM != nil {
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		defer client.CloseIdleConnections()
		resp, err := client.Get("https://" + s.Addr() + Path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "phalanx_runs_in_progress")) {
			t.Errorf("GET %s: %s\n%s", Path, resp.Status, body)
		}
		return err
	}
	if err := get(pki.Issue(t, security.RoleClient, "prometheus")); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if err := get(nil, nil); err == nil {
		t.Error("no client certificate: admitted")
	}
	if err := get(pki.Issue(t, security.RoleCoordinator, "c1")); err == nil {
		t.Error("a coordinator's certificate: admitted")
	}
	if err := get(securitytest.New(t).Issue(t, security.RoleClient, "stranger")); err == nil {
		t.Error("a client certificate of another CA: admitted")
	}
}

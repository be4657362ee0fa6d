package security_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a gRPC server with cfg's credentials and a health service
// on loopback; it returns its address and the log of its refusals.
func serve(t *testing.T, cfg security.Config) (string, *securitytest.Log) {
	t.Helper()
	logs := &securitytest.Log{}
	opts, err := cfg.ServerOptions(slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String(), logs
}

// call makes one unary health check and opens one server stream (Watch)
// through dial, and returns the unary call's error; the stream must fail
// or succeed alike.
func call(t *testing.T, addr string, dial grpc.DialOption) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	_, unaryErr := client.Check(ctx, &healthpb.HealthCheckRequest{})
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != status.Code(unaryErr) {
		t.Errorf("stream call: %v; unary call: %v", err, unaryErr)
	}
	return unaryErr
}

func dialOf(t *testing.T, cfg security.Config) grpc.DialOption {
	t.Helper()
	d, err := cfg.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestInsecureHop serves and dials with the zero Config: a call goes
// through.
func TestInsecureHop(t *testing.T) {
	var cfg security.Config
	addr, _ := serve(t, cfg)
	if err := call(t, addr, dialOf(t, cfg)); err != nil {
		t.Fatal(err)
	}
}

// TestMutualTLS: the coordinator's server accepts client and coordinator
// certificates, an agent's only the coordinator's; a peer without a
// certificate or with one of another CA is refused with Unauthenticated,
// one of a role that may not call with PermissionDenied, and each refusal
// is logged with the peer's address and the reason, never key material.
func TestMutualTLS(t *testing.T) {
	pki := securitytest.New(t)
	other := securitytest.New(t)
	pool := pki.Pool()

	coordAddr, coordLog := serve(t, pki.Config(t, security.RoleCoordinator))
	agentAddr, agentLog := serve(t, pki.Config(t, security.RoleAgent))

	agentCert, agentKey := pki.Issue(t, security.RoleAgent, "agent-1")
	clientCert, clientKey := pki.Issue(t, security.RoleClient, "ops")
	foreignCert, foreignKey := other.Issue(t, security.RoleClient, "ops")
	foreignCoord, foreignCoordKey := other.Issue(t, security.RoleCoordinator, "coord")
	coordCert, coordKey := pki.Issue(t, security.RoleCoordinator, "coordinator")

	cases := []struct {
		name   string
		addr   string
		server security.Role
		dial   grpc.DialOption
		want   codes.Code
		reason string // in the refusal's log line
	}{
		{"coordctl to coordinator", coordAddr, security.RoleCoordinator, dialOf(t, pki.Config(t, security.RoleClient)), codes.OK, ""},
		{"coordinator to coordinator", coordAddr, security.RoleCoordinator, securitytest.Dial(t, coordCert, coordKey, pool, security.RoleCoordinator), codes.OK, ""},
		{"coordinator to agent", agentAddr, security.RoleAgent, dialOf(t, pki.Config(t, security.RoleCoordinator)), codes.OK, ""},
		{"no certificate to coordinator", coordAddr, security.RoleCoordinator, securitytest.Dial(t, nil, nil, pool, security.RoleCoordinator), codes.Unauthenticated, "no client certificate"},
		{"no certificate to agent", agentAddr, security.RoleAgent, securitytest.Dial(t, nil, nil, pool, security.RoleAgent), codes.Unauthenticated, "no client certificate"},
		{"other CA to coordinator", coordAddr, security.RoleCoordinator, securitytest.Dial(t, foreignCert, foreignKey, pool, security.RoleCoordinator), codes.Unauthenticated, "not valid under this cluster's CA"},
		{"other CA's coordinator to agent", agentAddr, security.RoleAgent, securitytest.Dial(t, foreignCoord, foreignCoordKey, pool, security.RoleAgent), codes.Unauthenticated, "not valid under this cluster's CA"},
		{"agent certificate to coordinator", coordAddr, security.RoleCoordinator, securitytest.Dial(t, agentCert, agentKey, pool, security.RoleCoordinator), codes.PermissionDenied, "has role agent; the coordinator accepts only role client or coordinator"},
		{"agent certificate to agent", agentAddr, security.RoleAgent, securitytest.Dial(t, agentCert, agentKey, pool, security.RoleAgent), codes.PermissionDenied, "has role agent; the agent accepts only role coordinator"},
		{"client certificate to agent", agentAddr, security.RoleAgent, securitytest.Dial(t, clientCert, clientKey, pool, security.RoleAgent), codes.PermissionDenied, "has role client; the agent accepts only role coordinator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := call(t, c.addr, c.dial)
			if got := status.Code(err); got != c.want {
				t.Fatalf("call: %v (code %v), want code %v", err, got, c.want)
			}
			if c.want == codes.OK {
				return
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, c.server.String()+" refused the call") || !strings.Contains(msg, c.reason) {
				t.Errorf("message %q does not say who refused and why (%q)", msg, c.reason)
			}
			log := coordLog
			if c.server == security.RoleAgent {
				log = agentLog
			}
			if len(log.Lines("refused a gRPC call", "peer=127.0.0.1:", "code="+c.want.String(), c.reason)) == 0 {
				t.Errorf("no refusal logged with peer, code and %q:\n%s", c.reason, log)
			}
		})
	}
	for _, l := range []string{coordLog.String(), agentLog.String()} {
		for _, secret := range [][]byte{agentKey, clientKey, foreignKey, []byte("PRIVATE KEY")} {
			if strings.Contains(l, string(secret)) {
				t.Errorf("a log holds key material:\n%s", l)
			}
		}
	}
}

// TestPlaintextToTLS: a plaintext client of a mutual-TLS server fails,
// and the server logs the failed handshake with the peer's address.
func TestPlaintextToTLS(t *testing.T) {
	pki := securitytest.New(t)
	addr, log := serve(t, pki.Config(t, security.RoleCoordinator))
	if err := call(t, addr, dialOf(t, security.Config{})); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext call: %v, want Unavailable", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(log.Lines("TLS handshake failed", "peer=127.0.0.1:")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no failed handshake logged:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientVerifiesServerRole: coordctl refuses a server whose
// certificate is an agent's, and one of another CA.
func TestClientVerifiesServerRole(t *testing.T) {
	pki := securitytest.New(t)
	client := dialOf(t, pki.Config(t, security.RoleClient))
	agentAddr, _ := serve(t, pki.Config(t, security.RoleAgent))
	err := call(t, agentAddr, client)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "coordinator.phalanx") {
		t.Errorf("coordctl to an agent's server: %v, want Unavailable naming coordinator.phalanx", err)
	}
	otherAddr, _ := serve(t, securitytest.New(t).Config(t, security.RoleCoordinator))
	err = call(t, otherAddr, client)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("coordctl to another CA's coordinator: %v, want Unavailable, unknown authority", err)
	}
}

func TestWrongUse(t *testing.T) {
	if _, err := (security.Config{Mode: security.Mode(7)}).DialOption(); err == nil {
		t.Error("DialOption: want an error for an unknown mode")
	}
	if _, err := (security.Config{Mode: security.Mode(7)}).ServerOptions(nil); err == nil {
		t.Error("ServerOptions: want an error for an unknown mode")
	}
	if got := security.Mode(7).String(); got != "Mode(7)" {
		t.Errorf("String() = %q", got)
	}
	if _, err := (security.Config{Mode: security.ModeMutualTLS}).DialOption(); err == nil {
		t.Error("DialOption: want an error for mutual TLS without credentials")
	}
	pki := securitytest.New(t)
	if _, err := pki.Config(t, security.RoleAgent).DialOption(); err == nil {
		t.Error("DialOption of an agent: want an error (agents dial no one)")
	}
	if _, err := pki.Config(t, security.RoleClient).ServerOptions(nil); err == nil {
		t.Error("ServerOptions of a client: want an error (clients serve nothing)")
	}
}

// TestLoadFiles: all three files or none; every error names the flag and
// file at fault.
func TestLoadFiles(t *testing.T) {
	pki := securitytest.New(t)
	f := pki.Files(t, security.RoleAgent, "agent-1")
	cfg, err := security.LoadFiles(security.RoleAgent, f)
	if err != nil || cfg.Mode != security.ModeMutualTLS || cfg.Role != security.RoleAgent {
		t.Fatalf("LoadFiles = %+v, %v; want mutual TLS as an agent", cfg, err)
	}
	if cfg, err := security.LoadFiles(security.RoleAgent, security.Files{}); err != nil || cfg.Mode != security.ModeInsecure {
		t.Errorf("LoadFiles(no files) = %v, %v; want insecure", cfg.Mode, err)
	}

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := securitytest.New(t).Files(t, security.RoleAgent, "agent-1")
	otherKey, _ := os.ReadFile(other.Key)
	coord := pki.Files(t, security.RoleCoordinator, "c")
	envFrom := map[string]string{
		security.FlagCA:   "PHALANX_TLS_CA (environment)",
		security.FlagCert: "PHALANX_TLS_CERT (environment)",
		security.FlagKey:  "PHALANX_TLS_KEY (environment)",
	}
	cases := []struct {
		name string
		f    security.Files
		want []string
	}{
		{"CA only", security.Files{CA: f.CA}, []string{"--tls-cert and --tls-key missing", "no plaintext fall-back"}},
		{"no key", security.Files{CA: f.CA, Cert: f.Cert}, []string{"--tls-key missing"}},
		{"no CA", security.Files{Cert: f.Cert, Key: f.Key}, []string{"--tls-ca missing"}},
		{"missing file", security.Files{CA: f.CA, Cert: f.Cert, Key: filepath.Join(dir, "nope.pem")}, []string{"--tls-key", "nope.pem", "no such file"}},
		{"CA not PEM", security.Files{CA: write("junk.pem", []byte("junk")), Cert: f.Cert, Key: f.Key}, []string{"--tls-ca", "junk.pem", "no PEM CERTIFICATE"}},
		{"CA is a leaf", security.Files{CA: f.Cert, Cert: f.Cert, Key: f.Key}, []string{"--tls-ca", "is not a CA"}},
		{"key of another certificate", security.Files{CA: f.CA, Cert: f.Cert, Key: write("other-key.pem", otherKey)}, []string{"--tls-key", "other-key.pem", "not the key of the --tls-cert certificate"}},
		{"certificate of another CA", security.Files{CA: f.CA, Cert: other.Cert, Key: other.Key}, []string{"--tls-cert", other.Cert, "not valid under the --tls-ca CA", "unknown authority"}},
		{"certificate of another role", security.Files{CA: f.CA, Cert: coord.Cert, Key: coord.Key}, []string{"--tls-cert", "has role coordinator; the agent needs one of role agent"}},
		// Values from the environment are named by their variable.
		{"CA only, from the environment", security.Files{CA: f.CA, From: envFrom}, []string{"--tls-cert and --tls-key missing, given only PHALANX_TLS_CA (environment) " + f.CA}},
		{"CA by flag", security.Files{CA: f.CA}, []string{"missing, given only --tls-ca " + f.CA}},
		{"certificate of another role, from the environment", security.Files{CA: f.CA, Cert: coord.Cert, Key: coord.Key, From: envFrom},
			[]string{"PHALANX_TLS_CERT (environment) " + coord.Cert + ": certificate", "has role coordinator"}},
		{"key of another certificate, from the environment", security.Files{CA: f.CA, Cert: f.Cert, Key: write("other-key2.pem", otherKey), From: envFrom},
			[]string{"PHALANX_TLS_KEY (environment) ", "not the key of the PHALANX_TLS_CERT (environment) certificate"}},
		{"missing file, from the environment", security.Files{CA: f.CA, Cert: f.Cert, Key: filepath.Join(dir, "nope.pem"), From: envFrom}, []string{"PHALANX_TLS_KEY (environment): ", "no such file"}},
	}
	for _, c := range cases {
		_, err := security.LoadFiles(security.RoleAgent, c.f)
		if err != nil && c.f.From != nil && c.f.Cert != "" && strings.Contains(err.Error(), "--tls-cert "+c.f.Cert) {
			t.Errorf("%s: error %q names --tls-cert for a value from the environment", c.name, err)
		}
		if err == nil {
			t.Errorf("%s: LoadFiles succeeded, want an error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(otherKey[40:80])) {
			t.Errorf("%s: error shows key material: %v", c.name, err)
		}
	}
}

// TestLoadFilesExpired: an expired certificate's error leads with when it
// expired and how to replace it, not x509's "expired or is not yet valid".
func TestLoadFilesExpired(t *testing.T) {
	pki := securitytest.New(t)
	certPEM, keyPEM, err := pki.CA.Issue(security.CertRequest{Role: security.RoleAgent, Name: "old", Lifetime: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(mustPEM(t, certPEM))
	if err != nil {
		t.Fatal(err)
	}
	// x509 times have a resolution of a second: wait until it is past.
	time.Sleep(time.Until(leaf.NotAfter.Add(1100 * time.Millisecond)))
	dir := t.TempDir()
	f := security.Files{CA: pki.Files(t, security.RoleAgent, "a").CA, Cert: filepath.Join(dir, "old.pem"), Key: filepath.Join(dir, "old-key.pem")}
	for path, data := range map[string][]byte{f.Cert: certPEM, f.Key: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err = security.LoadFiles(security.RoleAgent, f)
	want := "--tls-cert " + f.Cert + `: certificate "old" expired on ` + leaf.NotAfter.UTC().Format("2006-01-02 15:04:05 UTC") + "; issue a new one (coordctl tls cert create --role agent --name old)"
	if err == nil || err.Error() != want {
		t.Errorf("LoadFiles with an expired certificate: %v\nwant %s", err, want)
	}
}

func mustPEM(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b.Bytes
}

// rawCodec sends the bytes it is given as the message, unchecked, and
// reads nothing.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

// TestRefusedBeforeDecoding: a caller without a certificate is refused
// with Unauthenticated (and logged) before the server reads its message
// or looks its method up: a malformed message got Internal ("grpc: error
// unmarshalling request") and an unknown method Unimplemented, neither
// logged, when the gate ran as an interceptor, after decoding.
func TestRefusedBeforeDecoding(t *testing.T) {
	pki := securitytest.New(t)
	addr, log := serve(t, pki.Config(t, security.RoleCoordinator))
	conn, err := grpc.NewClient(addr, securitytest.Dial(t, nil, nil, pki.Pool(), security.RoleCoordinator))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct{ method, what string }{
		{"/grpc.health.v1.Health/Check", "a malformed message"},
		{"/phalanx.v1.NoSuchService/Nothing", "an unknown method"},
	} {
		var reply []byte
		err := conn.Invoke(ctx, c.method, []byte{0xff, 0xff, 0xff}, &reply, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s without a certificate (%s): %v, want Unauthenticated", c.what, c.method, err)
		}
		if len(log.Lines("refused a gRPC call", "method="+c.method, "no client certificate")) == 0 {
			t.Errorf("%s without a certificate: no refusal logged:\n%s", c.what, log)
		}
	}
}

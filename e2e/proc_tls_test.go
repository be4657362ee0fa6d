package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestProcTLS runs a coordinator and two agents as processes with mutual
// TLS on every hop. A run end to end (coordctl -> coordinator -> agents ->
// the built-in target) works and its report matches the target's count
// exactly. coordctl without a certificate, or with a partial TLS
// configuration, is refused; rogue clients without a certificate, with one
// of another CA, or with an agent's certificate are refused by the
// coordinator and by an agent (Unauthenticated, PermissionDenied), and each
// refusal is in the refusing daemon's log with the peer's address and the
// reason, and no key material.
func TestProcTLS(t *testing.T) {
	srv, ca := startTarget(t)
	dir := t.TempDir()
	targetCA, _, _, err := ca.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	pt := newProcTLS(t)
	c := startProcClusterWith(t, 2, pt)

	// coordctl agents and a run, with the client certificate.
	out, errOut, code := runCoordctl(t, 20*time.Second, procEnv(), c.coordctlArgs("agents")...)
	if code != 0 || !strings.Contains(out, "proc-agent-1") || !strings.Contains(out, "proc-agent-2") {
		t.Fatalf("coordctl agents over TLS: exit %d\n%s%s", code, out, errOut)
	}
	jsonFile := filepath.Join(dir, "tls.json")
	_, errOut, code = runCoordctl(t, 60*time.Second, procEnv(),
		c.coordctlArgs("run", "-n", "300", "-c", "4", "--cacert", targetCA, "--json", jsonFile, srv.URL())...)
	if code != 0 {
		t.Fatalf("coordctl run over TLS: exit %d\n%s", code, errOut)
	}
	rep := readProcReport(t, jsonFile)
	if rep.Requests != 300 || srv.Requests() != 300 || rep.AgentCount != 2 {
		t.Errorf("report: %d requests from %d agents; target counted %d; want 300, 2, 300", rep.Requests, rep.AgentCount, srv.Requests())
	}

	// The same coordctl through environment variables instead of flags.
	env := procEnv("PHALANX_TLS_CA="+pt.client.CA, "PHALANX_TLS_CERT="+pt.client.Cert, "PHALANX_TLS_KEY="+pt.client.Key)
	if out, errOut, code := runCoordctl(t, 20*time.Second, env, "--coordinator", c.grpcAddr, "agents"); code != 0 || !strings.Contains(out, "proc-agent-1") {
		t.Errorf("coordctl agents with PHALANX_TLS_*: exit %d\n%s%s", code, out, errOut)
	}

	// coordctl without a certificate (plaintext): the coordinator refuses
	// the handshake and logs it.
	_, errOut, code = runCoordctl(t, 20*time.Second, procEnv(), "--coordinator", c.grpcAddr, "agents")
	if code != 1 || !strings.Contains(errOut, "the TLS handshake failed: the coordinator wants mutual TLS; give --tls-ca") {
		t.Errorf("coordctl agents without TLS: exit %d, stderr %q; want 1, saying the coordinator wants mutual TLS", code, errOut)
	}
	waitLog(t, c.coord, "refused a connection: TLS handshake failed", "peer=127.0.0.1:")
	// A partial TLS configuration is a usage error naming what is missing.
	_, errOut, code = runCoordctl(t, 20*time.Second, procEnv(), "--coordinator", c.grpcAddr, "--tls-ca", pt.client.CA, "agents")
	if code != 2 || !strings.Contains(errOut, "--tls-cert and --tls-key missing") {
		t.Errorf("coordctl agents with --tls-ca only: exit %d, stderr %q; want 2 naming the missing flags", code, errOut)
	}
	// An agent's certificate as coordctl's: refused before any call.
	agentFiles := pt.pki.Files(t, security.RoleAgent, "rogue")
	_, errOut, code = runCoordctl(t, 20*time.Second, procEnv(), append([]string{"--coordinator", c.grpcAddr}, append(tlsArgs(agentFiles), "agents")...)...)
	if code != 2 || !strings.Contains(errOut, "has role agent; the client needs one of role client") {
		t.Errorf("coordctl agents with an agent's certificate: exit %d, stderr %q; want 2", code, errOut)
	}

	// Rogue clients, against the coordinator and an agent.
	agents, err := listAgentsWith(context.Background(), c.grpcAddr, c.clientSecurity(t))
	if err != nil || len(agents) != 2 {
		t.Fatalf("list agents: %v, %v", agents, err)
	}
	agentAddr, agentProc := agents[0].GetGrpcAddr(), c.agents[0]
	if agents[0].GetName() != agentProc.name {
		agentProc = c.agents[1]
	}
	pool := pt.pki.Pool()
	other := securitytest.New(t)
	agentCert, agentKey := pt.pki.Issue(t, security.RoleAgent, "rogue-agent")
	clientCert, clientKey := pt.pki.Issue(t, security.RoleClient, "rogue-client")
	foreignCert, foreignKey := other.Issue(t, security.RoleCoordinator, "rogue-coordinator")
	for _, rc := range []struct {
		name       string
		cert, key  []byte
		toCoord    codes.Code
		toAgent    codes.Code
		coordWhy   string
		agentWhy   string
		secretsOut [][]byte
	}{
		{"no certificate", nil, nil, codes.Unauthenticated, codes.Unauthenticated, "no client certificate", "no client certificate", nil},
		{"another CA", foreignCert, foreignKey, codes.Unauthenticated, codes.Unauthenticated, "not valid under this cluster's CA", "not valid under this cluster's CA", [][]byte{foreignKey}},
		{"agent certificate", agentCert, agentKey, codes.PermissionDenied, codes.PermissionDenied, "has role agent; the coordinator accepts only role client or coordinator", "has role agent; the agent accepts only role coordinator", [][]byte{agentKey}},
		{"client certificate", clientCert, clientKey, codes.OK, codes.PermissionDenied, "", "has role client; the agent accepts only role coordinator", [][]byte{clientKey}},
	} {
		coordErr := rogueCall(t, c.grpcAddr, security.RoleCoordinator, rc.cert, rc.key, pool)
		agentErr := rogueCall(t, agentAddr, security.RoleAgent, rc.cert, rc.key, pool)
		if status.Code(coordErr) != rc.toCoord {
			t.Errorf("%s to the coordinator: %v, want %v", rc.name, coordErr, rc.toCoord)
		}
		if status.Code(agentErr) != rc.toAgent {
			t.Errorf("%s to an agent: %v, want %v", rc.name, agentErr, rc.toAgent)
		}
		if rc.toCoord != codes.OK {
			waitLog(t, c.coord, "refused a gRPC call", "peer=127.0.0.1:", "code="+rc.toCoord.String(), rc.coordWhy)
		}
		waitLog(t, agentProc, "refused a gRPC call", "peer=127.0.0.1:", "code="+rc.toAgent.String(), rc.agentWhy)
		for _, secret := range rc.secretsOut {
			for _, p := range []*proc{c.coord, agentProc} {
				if strings.Contains(p.Stderr(), string(secret[30:90])) {
					t.Errorf("%s's log holds the %s key", p.name, rc.name)
				}
			}
		}
	}
	for _, p := range append([]*proc{c.coord}, c.agents...) {
		if strings.Contains(p.Stderr(), "PRIVATE KEY") {
			t.Errorf("%s's log shows key material", p.name)
		}
	}
}

// rogueCall calls ListAgents (role coordinator) or Clock (role agent) at
// addr over TLS with the given client certificate (none when nil),
// expecting a server of role, and returns the call's error.
func rogueCall(t *testing.T, addr string, role security.Role, certPEM, keyPEM []byte, pool *x509.CertPool) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, securitytest.Dial(t, certPEM, keyPEM, pool, role))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if role == security.RoleAgent {
		_, err = pb.NewAgentServiceClient(conn).Clock(ctx, &pb.ClockRequest{})
	} else {
		_, err = pb.NewCoordinatorServiceClient(conn).ListAgents(ctx, &pb.ListAgentsRequest{})
	}
	return err
}

// waitLog waits until one line of p's stderr holds every part.
func waitLog(t *testing.T, p *proc, parts ...string) {
	t.Helper()
	err := waitUntil(5*time.Second, p, func(context.Context) error {
		for _, line := range strings.Split(p.Stderr(), "\n") {
			all := true
			for _, part := range parts {
				all = all && strings.Contains(line, part)
			}
			if all {
				return nil
			}
		}
		return fmt.Errorf("no line with %q", parts)
	})
	if err != nil {
		t.Errorf("%s's log: %v\n%s", p.name, err, p.describe())
	}
}

// TestProcSafeDefault: a daemon whose gRPC or gossip address is not
// loopback does not start without mutual TLS (nothing is bound: the check
// comes first), nor with a partial TLS configuration, and says what is
// missing. (The netns test starts them on real addresses with TLS, and
// with --insecure-cluster.)
func TestProcSafeDefault(t *testing.T) {
	pki := securitytest.New(t)
	files := pki.Files(t, security.RoleAgent, "a")
	for _, bin := range []string{"agent", "coordinator"} {
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"--grpc-addr", "127.0.0.1:0", "--gossip-addr", "198.18.0.1:0"},
				[]string{"--gossip-addr 198.18.0.1:0 is not a loopback address", "--tls-ca", "--insecure-cluster"}},
			{[]string{"--grpc-addr", "198.18.0.1:0", "--gossip-addr", "127.0.0.1:0"},
				[]string{"--grpc-addr 198.18.0.1:0 is not a loopback address"}},
			{[]string{"--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--tls-ca", files.CA, "--tls-key", files.Key},
				[]string{"--tls-cert missing", "no plaintext fall-back"}},
			{[]string{"--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--tls-cert", files.Cert},
				[]string{"--tls-ca and --tls-key missing"}},
		} {
			p := startProc(t, bin, false, procEnv(), procBinary(t, bin), c.args...)
			code, ok := p.Wait(20 * time.Second)
			if !ok {
				t.Fatalf("%s %v still running\n%s", bin, c.args, p.describe())
			}
			if code != 1 {
				t.Errorf("%s %v: exit %d, want 1\n%s", bin, c.args, code, p.describe())
			}
			for _, w := range c.want {
				if !strings.Contains(p.Stderr(), w) {
					t.Errorf("%s %v: stderr does not say %q\n%s", bin, c.args, w, p.describe())
				}
			}
		}
	}
	// Mutual TLS does not cover gossip: on the network it needs a gossip
	// key too.
	args := []string{"--grpc-addr", "127.0.0.1:0", "--gossip-addr", "198.18.0.1:0", "--tls-ca", files.CA, "--tls-cert", files.Cert, "--tls-key", files.Key}
	gp := startProc(t, "agent", false, procEnv(), procBinary(t, "agent"), args...)
	if code, ok := gp.Wait(20 * time.Second); !ok || code != 1 || !strings.Contains(gp.Stderr(), "--gossip-addr 198.18.0.1:0 is not a loopback address: a daemon on the network needs a gossip key for its gossip (--gossip-key-file") {
		t.Errorf("agent %v: exit %d (exited %v); want 1, asking for --gossip-key-file\n%s", args, code, ok, gp.describe())
	}
	// ... and says what --insecure-cluster would allow: unencrypted gossip only.
	if want := "or --insecure-cluster to start anyway, and then gossip on --gossip-addr 198.18.0.1:0 is unencrypted: anyone who reaches it may join the cluster and read its membership"; !strings.Contains(gp.Stderr(), want) {
		t.Errorf("agent %v: stderr does not say %q\n%s", args, want, gp.describe())
	}
	// The default --gossip-addr is named as the default, with the one-host fix.
	dp := startProc(t, "agent", false, procEnv(), procBinary(t, "agent"), "--grpc-addr", "127.0.0.1:0")
	if code, ok := dp.Wait(20 * time.Second); !ok || code != 1 ||
		!strings.Contains(dp.Stderr(), "--gossip-addr 0.0.0.0:7946 (the default) is not a loopback address") || !strings.Contains(dp.Stderr(), "on one host, give --gossip-addr 127.0.0.1:PORT") {
		t.Errorf("agent with the default --gossip-addr: exit %d (exited %v); want 1, naming the default and the one-host fix\n%s", code, ok, dp.describe())
	}
	// The environment counts as the flags do: a partial set there is refused too.
	p := startProc(t, "agent", false, procEnv("PHALANX_TLS_CA="+files.CA), procBinary(t, "agent"), "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	if code, ok := p.Wait(20 * time.Second); !ok || code != 1 || !strings.Contains(p.Stderr(), "--tls-cert and --tls-key missing, given only PHALANX_TLS_CA (environment) "+files.CA) {
		t.Errorf("agent with PHALANX_TLS_CA only: exit %d (exited %v), want 1 naming the missing flags and the variable given\n%s", code, ok, p.describe())
	}
	// A value from the environment is named by its variable, not as a
	// flag that was never typed.
	client := pki.Files(t, security.RoleClient, "ops")
	p = startProc(t, "coordinator", false, procEnv("PHALANX_TLS_CA="+files.CA, "PHALANX_TLS_CERT="+client.Cert, "PHALANX_TLS_KEY="+client.Key),
		procBinary(t, "coordinator"), "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	if code, ok := p.Wait(20 * time.Second); !ok || code != 1 || !strings.Contains(p.Stderr(), "PHALANX_TLS_CERT (environment) "+client.Cert+`: certificate "ops" has role client`) ||
		strings.Contains(p.Stderr(), "--tls-cert "+client.Cert) {
		t.Errorf("coordinator with a client certificate in PHALANX_TLS_CERT: exit %d (exited %v), want 1 naming PHALANX_TLS_CERT (environment)\n%s", code, ok, p.describe())
	}
	p = startProc(t, "agent", false, procEnv("PHALANX_INSECURE_CLUSTER=yes"), procBinary(t, "agent"), "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	if code, ok := p.Wait(20 * time.Second); !ok || code != 2 || !strings.Contains(p.Stderr(), `PHALANX_INSECURE_CLUSTER="yes" (for --insecure-cluster): want true or false`) {
		t.Errorf("agent with PHALANX_INSECURE_CLUSTER=yes: exit %d (exited %v), want 2 (a bad configuration value, as a bad flag) saying want true or false\n%s", code, ok, p.describe())
	}
}

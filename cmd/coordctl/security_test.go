package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// TestPlaintextAgentInTLSCluster: a plaintext agent that joined a
// mutual-TLS coordinator's gossip shows as insecure in coordctl agents, the
// coordinator warns about it once, and a run fails before any dial with
// exit 1 (not 5: the coordinator is not lost), naming the agent and the
// fix, with no partial report and no --json file.
func TestPlaintextAgentInTLSCluster(t *testing.T) {
	srv, b := targettest.Start(t)
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pki := securitytest.New(t)
	logs := &securitytest.Log{}
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		CoordinatorSecurity: pki.Config(t, security.RoleCoordinator),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := pki.Files(t, security.RoleClient, "ops")
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	code, stdout, stderr := runCLI("--coordinator", c.Coordinator.GRPCAddr(), "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key,
		"run", "-c1", "-n1", "--cacert", caFile, "--json", jsonFile, srv.URL())
	agent := "agent agent-1 at " + c.Agents[0].GRPCAddr() + ": its gRPC is plaintext while this coordinator's is mutual TLS: start the agent with --tls-ca, --tls-cert and --tls-key"
	if code != 1 || !strings.Contains(stderr, "no usable agents: "+agent) {
		t.Errorf("run with a plaintext agent: exit %d, stderr %q; want 1, naming %q", code, stderr, agent)
	}
	if strings.Contains(stderr+stdout, "partial") || strings.Contains(stderr, "lost the coordinator") {
		t.Errorf("run with a plaintext agent reports a lost coordinator or a partial report:\nstdout %q\nstderr %q", stdout, stderr)
	}
	if _, err := os.Stat(jsonFile); !os.IsNotExist(err) {
		t.Errorf("the --json file of the failed run is left behind: %v", err)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
	code, stdout, _ = runCLI("--coordinator", c.Coordinator.GRPCAddr(), "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key, "agents")
	if lines := strings.Split(stdout, "\n"); code != 0 || len(lines) < 2 || !strings.Contains(lines[0], "SECURITY") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "agent-1 "+c.Agents[0].GRPCAddr()+" insecure ") {
		t.Errorf("coordctl agents: exit %d, output %q; want agent-1's SECURITY insecure", code, stdout)
	}
	if got := logs.Lines("level=WARN", "agent not usable for runs: its gRPC is plaintext", "agent=agent-1"); len(got) != 1 {
		t.Errorf("%d join warnings about the plaintext agent, want 1:\n%s", len(got), logs.String())
	}
	if got := logs.Lines("level=WARN", "agent not used for the run", "agent=agent-1"); len(got) != 1 {
		t.Errorf("%d run warnings about the plaintext agent, want 1:\n%s", len(got), logs.String())
	}
}

// TestTLSDialErrorsSayWhatToDo: coordctl's failed TLS handshakes with a
// mutual-TLS cluster say what happened and what to do, for a unary call
// (agents) and a stream (run): no TLS flags, a --tls-ca of another CA, and
// an agent's address as --coordinator.
func TestTLSDialErrorsSayWhatToDo(t *testing.T) {
	srv, b := targettest.Start(t)
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pki := securitytest.New(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CoordinatorSecurity: pki.Config(t, security.RoleCoordinator), AgentSecurity: pki.Config(t, security.RoleAgent),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	coord, agent := c.Coordinator.GRPCAddr(), c.Agents[0].GRPCAddr()
	good := pki.Files(t, security.RoleClient, "ops")
	other := securitytest.New(t).Files(t, security.RoleClient, "ops")
	wrongCA := []string{"--tls-ca", other.CA, "--tls-cert", other.Cert, "--tls-key", other.Key} // a whole other cluster's
	withTLS := []string{"--tls-ca", good.CA, "--tls-cert", good.Cert, "--tls-key", good.Key}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no TLS flags", []string{"--coordinator", coord},
			"reached " + coord + " but the TLS handshake failed: the coordinator wants mutual TLS; give --tls-ca/--tls-cert/--tls-key or PHALANX_TLS_CA/PHALANX_TLS_CERT/PHALANX_TLS_KEY"},
		{"another CA", append([]string{"--coordinator", coord}, wrongCA...),
			"reached " + coord + " but the coordinator's certificate is not signed by --tls-ca " + other.CA},
		{"agent port", append([]string{"--coordinator", agent}, withTLS...),
			agent + " is an agent (its certificate is for agent.phalanx), not the coordinator: --coordinator takes the coordinator's --grpc-addr"},
	} {
		for _, cmd := range [][]string{{"agents"}, {"run", "-c1", "-n1", "--cacert", caFile, srv.URL()}} {
			code, _, stderr := runCLI(append(append([]string{}, tc.args...), cmd...)...)
			if code != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "unreachable") {
				t.Errorf("%s, coordctl %s: exit %d, stderr %q; want 1 and %q", tc.name, cmd[0], code, stderr, tc.want)
			}
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
}

package main

import (
	"context"
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

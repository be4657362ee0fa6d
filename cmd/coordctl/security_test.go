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

// TestPlaintextAgentInTLSCluster: a run on a mutual-TLS coordinator whose
// agent serves plaintext gRPC fails with exit 1 (not 5: the coordinator is
// not lost), naming the agent and the fix, with no partial report and no
// --json file.
func TestPlaintextAgentInTLSCluster(t *testing.T) {
	srv, b := targettest.Start(t)
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pki := securitytest.New(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	agent := "agent-1 at " + c.Agents[0].GRPCAddr() + " unreachable"
	if code != 1 || !strings.Contains(stderr, agent) || !strings.Contains(stderr, "it does not speak TLS: started without --tls-*?") {
		t.Errorf("run with a plaintext agent: exit %d, stderr %q; want 1, naming %q and the fix", code, stderr, agent)
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
}

package main

import (
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/version"
)

func TestVersionFlag(t *testing.T) {
	code, stdout, stderr := runCLI("--version")
	if code != 0 {
		t.Fatalf("--version: exit %d: %s", code, stderr)
	}
	if want := "coordctl " + version.String() + "\n"; stdout != want {
		t.Errorf("--version printed %q, want %q", stdout, want)
	}
}

// TestAgentsShowVersion: coordctl agents shows the security, version, caps and
// allowlist each agent advertises in its node meta.
func TestAgentsShowVersion(t *testing.T) {
	env := newTestEnv(t, 1)
	code, stdout, stderr := runCLI("--coordinator", env.coord, "agents")
	if code != 0 {
		t.Fatalf("agents: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ADDRESS SECURITY CPUS PINNED STATE VERSION MAX-CONNS MAX-RATE ALLOW-TARGETS" {
		t.Fatalf("agents output:\n%s", stdout)
	}
	f := strings.Fields(lines[1])
	if len(f) != 10 || f[0] != "agent-1" || f[2] != "insecure" || f[4] != "-" || f[6] != version.Version || f[7] != "-" || f[8] != "-" || f[9] != allow.DefaultSpec {
		t.Errorf("agents row %q: want agent-1, not pinned, with version %q, no caps, allowlist %s", lines[1], version.Version, allow.DefaultSpec)
	}
}

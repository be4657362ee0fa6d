package main

import (
	"strings"
	"testing"

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

// TestAgentsShowVersion: coordctl agents shows the version each agent
// advertises in its node meta.
func TestAgentsShowVersion(t *testing.T) {
	env := newTestEnv(t, 1)
	code, stdout, stderr := runCLI("--coordinator", env.coord, "agents")
	if code != 0 {
		t.Fatalf("agents: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "VERSION") {
		t.Fatalf("agents output:\n%s", stdout)
	}
	f := strings.Fields(lines[1])
	if f[0] != "agent-1" || f[len(f)-1] != version.Version {
		t.Errorf("agents row %q: want agent-1 with version %q", lines[1], version.Version)
	}
}

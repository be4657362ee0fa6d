package e2e

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestProcVersion: the three binaries, stamped at build time with
// -ldflags -X, print their name, version, commit and Go version on
// --version, and coordctl agents shows each agent's version from its node
// meta.
func TestProcVersion(t *testing.T) {
	for _, name := range []string{"agent", "coordinator", "coordctl"} {
		out, err := exec.Command(procBinary(t, name), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", name, err, out)
		}
		line := strings.TrimSpace(string(out))
		for _, want := range []string{name + " " + procVersion, "commit " + procCommit, runtime.Version()} {
			if !strings.Contains(line, want) {
				t.Errorf("%s --version = %q, lacks %q", name, line, want)
			}
		}
	}

	c := startProcCluster(t, 1)
	stdout, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "--coordinator", c.grpcAddr, "agents")
	if code != 0 {
		t.Fatalf("coordctl agents: exit %d\n%s", code, stderr)
	}
	var row string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "proc-agent-1 ") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("coordctl agents lists no proc-agent-1:\n%s", stdout)
	}
	// NAME ADDRESS SECURITY CPUS PINNED STATE VERSION MAX-CONNS MAX-RATE ALLOW-TARGETS
	if f := strings.Fields(row); len(f) != 10 || f[6] != procVersion {
		t.Errorf("coordctl agents row %q: want 10 columns, the seventh (VERSION) %q", row, procVersion)
	}
}

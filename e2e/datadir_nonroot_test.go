package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCoordinatorDataDirNonRoot: the coordinator started by a user who is
// not root, with the default --data-dir (/var/lib/phalanx, the systemd
// unit's state directory), fails with an error naming the flag and a
// directory of that user's own (its XDG state home). It runs as uid 65534
// through setpriv (util-linux), skipping only without it.
func TestCoordinatorDataDirNonRoot(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged uid")
	}
	// A directory the unprivileged user can read and run the binary from.
	dir, err := os.MkdirTemp("", "phalanx-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "coordinator")
	data, err := os.ReadFile(procBinary(t, "coordinator"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
		bin, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--local")
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	want := "give a directory of its own, --data-dir " + filepath.Join(home, ".local", "state", "phalanx") + ", or --data-dir '' to keep no runs"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("coordinator as uid 65534: err %v, output %q; want a failure containing %q", err, out, want)
	}
}

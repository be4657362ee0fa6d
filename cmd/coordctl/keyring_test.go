package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
)

// TestKeyringCommands: keyring list, install, use and remove through
// coordctl on a coordinator and two agents: list shows each key with its
// member and primary counts, a bad key is a usage error that does not
// echo it, a second coordinator in the cluster is reached too (4/4), and
// a member that did not apply an operation fails the command naming it.
func TestKeyringCommands(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	oldKey, newKey := cluster.GenerateKey(), cluster.GenerateKey()
	k, _ := cluster.ParseKey(oldKey)
	dir := t.TempDir()
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 2, CPUsPerAgent: 1, Logger: log, GossipKeys: [][]byte{k}, KeyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr := c.Coordinator.GRPCAddr()

	listLine := func(key string) string {
		t.Helper()
		code, out, errOut := runCLI("--coordinator", addr, "keyring", "list")
		if code != 0 {
			t.Fatalf("keyring list: exit %d: %s", code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, key) {
				return strings.Join(strings.Fields(line)[2:], " ")
			}
		}
		return ""
	}
	if got := listLine(oldKey); got != "3/3 3" {
		t.Errorf("list: old key %q, want \"3/3 3\" (3 of 3 members, 3 primary)", got)
	}
	for _, step := range [][]string{{"install", newKey}, {"use", newKey}, {"remove", oldKey}} {
		code, out, errOut := runCLI("--coordinator", addr, "keyring", step[0], step[1])
		if code != 0 || strings.Count(out, " ok\n") != 3 || !strings.Contains(errOut, "applied on all 3 members") {
			t.Fatalf("keyring %s: exit %d, stdout %q, stderr %q; want 3 members ok", step[0], code, out, errOut)
		}
		if strings.Contains(out+errOut, step[1]) {
			t.Errorf("keyring %s printed the key", step[0])
		}
	}
	if got, old := listLine(newKey), listLine(oldKey); got != "3/3 3" || old != "" {
		t.Errorf("list after rotation: new key %q, old key %q; want \"3/3 3\" and none", got, old)
	}

	bad := newKey[:20] + "!"
	code, _, errOut := runCLI("--coordinator", addr, "keyring", "install", bad)
	if code != 2 || !strings.Contains(errOut, "not valid base64") || strings.Contains(errOut, bad) {
		t.Errorf("install of a bad key: exit %d, %q; want 2, not valid base64, without the key", code, errOut)
	}

	for _, args := range [][]string{{"keyring", newKey}, {"keyring", "list", newKey}, {"keyring"}} {
		code, _, errOut := runCLI(append([]string{"--coordinator", addr}, args...)...)
		if code != 2 || strings.Contains(errOut, newKey) || !strings.Contains(errOut, "keyring") {
			t.Errorf("coordctl %s: exit %d, %q; want a usage error (2) that does not show the key", strings.Join(args, " "), code, errOut)
		}
	}

	// A second coordinator with the new key joins: the first reaches it
	// too (its MemberKeyring).
	file := filepath.Join(dir, "coordinator-2.keys")
	nk, _ := cluster.ParseKey(newKey)
	if err := cluster.WriteKeyFile(file, [][]byte{nk}); err != nil {
		t.Fatal(err)
	}
	co2, err := coordinator.New(coordinator.Config{Name: "coordinator-2", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Join: []string{c.Coordinator.GossipAddr()}, GossipKeyFile: file, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co2.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator-2: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(listLine(newKey), "4/4 4") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := listLine(newKey); got != "4/4 4" {
		t.Fatalf("list with a second coordinator: new key %q, want \"4/4 4\"", got)
	}
	// A member that does not apply an operation fails the command, named:
	// coordinator-2's key file can no longer be rewritten (a directory took
	// its name), so it applies the install but says it could not save it.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(file, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("--coordinator", addr, "keyring", "install", oldKey)
	if code != 1 || !strings.Contains(errOut, "coordinator-2: install gossip key sha256:") || !strings.Contains(errOut, "the key file was not rewritten") ||
		!strings.Contains(errOut, "1 of 4 members did not answer or apply it: coordinator-2") || strings.Contains(errOut, oldKey) {
		t.Errorf("install with coordinator-2's key file unwritable: exit %d, %q; want 1 naming coordinator-2 and why", code, errOut)
	}
}

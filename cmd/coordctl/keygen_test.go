package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/cluster"
)

// TestKeygen: keygen prints a fresh 32-byte base64 key each time; --out
// writes a key file of mode 0600 that --gossip-key-file reads, and never
// overwrites one.
func TestKeygen(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		code, out, errOut := runCLI("keygen")
		if code != 0 {
			t.Fatalf("keygen: exit %d: %s", code, errOut)
		}
		key := strings.TrimSpace(out)
		if _, err := cluster.ParseKey(key); err != nil {
			t.Fatalf("keygen printed %q: %v", key, err)
		}
		if seen[key] {
			t.Fatal("keygen printed the same key twice")
		}
		seen[key] = true
	}
	file := filepath.Join(t.TempDir(), "gossip.keys")
	code, out, errOut := runCLI("keygen", "--out", file)
	if code != 0 {
		t.Fatalf("keygen --out: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "==> wrote "+file+" (gossip key file") {
		t.Errorf("keygen --out printed %q; want it to name the file written", out)
	}
	kf, err := cluster.ReadKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(kf.Keys) != 1 || kf.Mode != 0o600 {
		t.Errorf("key file: %d keys, mode %v; want 1 key, 0600", len(kf.Keys), kf.Mode)
	}
	before, _ := os.ReadFile(file)
	code, _, errOut = runCLI("keygen", "--out", file)
	after, _ := os.ReadFile(file)
	if code == 0 || !strings.Contains(errOut, "exists") || string(before) != string(after) {
		t.Errorf("keygen --out over an existing file: exit %d, %q, file changed %v; want refused, unchanged", code, errOut, string(before) != string(after))
	}
}

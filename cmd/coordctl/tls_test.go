package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/security"
)

// TestTLSCreate makes a CA and a certificate of each role with coordctl
// tls: the files are 0600, their names printed, each certificate loads as
// its role's mutual-TLS credentials, and existing files are kept unless
// --force.
func TestTLSCreate(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("tls", "ca", "create", "--dir", dir)
	if code != 0 {
		t.Fatalf("tls ca create: exit %d: %s", code, errOut)
	}
	caFile, caKey := filepath.Join(dir, "phalanx-ca.pem"), filepath.Join(dir, "phalanx-ca-key.pem")
	for _, f := range []string{caFile, caKey} {
		if !strings.Contains(out, "wrote "+f) {
			t.Errorf("output does not name %s:\n%s", f, out)
		}
	}
	for _, role := range security.Roles {
		code, out, errOut := runCLI("tls", "cert", "create", "--role", role.String(), "--name", "n1",
			"--ca", caFile, "--ca-key", caKey, "--dir", dir, "--ip", "198.18.0.2", "--dns", "n1.lab.example")
		if code != 0 {
			t.Fatalf("tls cert create --role %v: exit %d: %s", role, code, errOut)
		}
		files := security.Files{CA: caFile, Cert: filepath.Join(dir, "phalanx-"+role.String()+"-n1.pem"), Key: filepath.Join(dir, "phalanx-"+role.String()+"-n1-key.pem")}
		for _, f := range []string{files.Cert, files.Key} {
			if !strings.Contains(out, "wrote "+f) {
				t.Errorf("output does not name %s:\n%s", f, out)
			}
		}
		if cfg, err := security.LoadFiles(role, files); err != nil || cfg.Role != role {
			t.Errorf("%v certificate: LoadFiles = %v, %v", role, cfg.Role, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 8 {
		t.Errorf("%d files written, want 8 (CA and 3 certificates, each with its key)", len(entries))
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}

	// Existing files are refused, untouched; --force overwrites them.
	before, _ := os.ReadFile(caKey)
	if code, _, errOut := runCLI("tls", "ca", "create", "--dir", dir); code != 1 || !strings.Contains(errOut, "exists: not overwritten (--force overwrites it)") {
		t.Errorf("second tls ca create: exit %d, stderr %q; want 1, refused", code, errOut)
	}
	if after, _ := os.ReadFile(caKey); string(after) != string(before) {
		t.Error("the refused tls ca create changed the CA key")
	}
	if code, _, errOut := runCLI("tls", "cert", "create", "--role", "agent", "--name", "n1", "--ca", caFile, "--ca-key", caKey, "--dir", dir); code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("second tls cert create: exit %d, stderr %q; want 1, refused", code, errOut)
	}
	if code, _, errOut := runCLI("tls", "ca", "create", "--dir", dir, "--force"); code != 0 {
		t.Errorf("tls ca create --force: exit %d: %s", code, errOut)
	}
	if after, _ := os.ReadFile(caKey); string(after) == string(before) {
		t.Error("tls ca create --force kept the old CA key")
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--role", "server", "--name", "x"}, 2, `--role: unknown role "server": want agent, coordinator or client`},
		{[]string{"--role", "agent", "--name", "../x"}, 2, "--name"},
		{[]string{"--role", "agent"}, 2, "--role and --name are required"},
		{[]string{"--role", "agent", "--name", "x", "--ip", "nope"}, 2, `--ip "nope"`},
		{[]string{"--role", "agent", "--name", "x", "--dns", "agent.phalanx"}, 2, "role names"},
		{[]string{"--role", "agent", "--name", "x", "--ca", filepath.Join(dir, "none.pem")}, 1, "--ca: open"},
	} {
		args := append([]string{"tls", "cert", "create", "--ca", caFile, "--ca-key", caKey, "--dir", t.TempDir()}, c.args...)
		code, _, errOut := runCLI(args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

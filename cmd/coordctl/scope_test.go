package main

import (
	"strings"
	"testing"
)

// TestClusterFlagsScope: the commands that never call the coordinator do
// not show --coordinator and --tls-* in their help and refuse them; those
// that call it show them.
func TestClusterFlagsScope(t *testing.T) {
	for _, tc := range []struct {
		args []string
		show bool
	}{
		{[]string{"demo", "--help"}, false},
		{[]string{"target", "--help"}, false},
		{[]string{"keygen", "--help"}, false},
		{[]string{"tls", "cert", "create", "--help"}, false},
		{[]string{"run", "--help"}, true},
		{[]string{"agents", "--help"}, true},
		{[]string{"keyring", "list", "--help"}, true},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != 0 {
			t.Fatalf("coordctl %v: exit %d: %s", tc.args, code, stderr)
		}
		for _, flag := range []string{"--coordinator", "--tls-ca", "--tls-cert", "--tls-key"} {
			if got := strings.Contains(stdout, flag); got != tc.show {
				t.Errorf("coordctl %v shows %s: %v, want %v\n%s", tc.args, flag, got, tc.show, stdout)
			}
		}
	}
	// The flags come back for the next command's help (they are hidden
	// only while an offline command's help is printed).
	if _, stdout, _ := runCLI("run", "--help"); !strings.Contains(stdout, "--coordinator") {
		t.Errorf("run --help after demo --help lacks --coordinator:\n%s", stdout)
	}
	for _, args := range [][]string{
		{"demo", "--coordinator", "127.0.0.1:1"},
		{"--coordinator", "127.0.0.1:1", "target"},
		{"keygen", "--tls-ca", "ca.pem"},
	} {
		code, _, stderr := runCLI(args...)
		if code != 2 || !strings.Contains(stderr, "does not use the coordinator") {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and does not use the coordinator", args, code, stderr)
		}
	}
}

// TestRunErrorExitsOne: an error that is no bad command line exits 1, as
// agent and coordinator do (their TestExitStatus), never 2. (A file a flag
// names that cannot be read, --cacert's say, is a bad command line, as a
// missing plan file: TestUsageErrors.)
func TestRunErrorExitsOne(t *testing.T) {
	for _, args := range [][]string{
		{"--coordinator", "127.0.0.1:1", "agents"},
		{"--coordinator", "127.0.0.1:1", "run", "-c1", "-d1", "https://127.0.0.1:1/"},
		{"--coordinator", "127.0.0.1:1", "runs"},
	} {
		code, _, stderr := runCLI(args...)
		if code != 1 || !strings.HasPrefix(stderr, "coordctl: ") {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 1 and a coordctl: message", args, code, stderr)
		}
	}
}

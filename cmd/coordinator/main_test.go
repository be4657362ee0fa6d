package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/daemon"
)

// TestExitStatus: a bad command line exits 2 with a message naming the flag
// and what is wrong in words, a start error 1, as coordctl (README, Exit
// status).
func TestExitStatus(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--bogus"}, 2, "coordinator: unknown flag: --bogus (see coordinator --help)"},
		{[]string{"extra"}, 2, `coordinator: unknown command "extra" for "coordinator"`},
		{[]string{"--local=maybe"}, 2, `coordinator: --local "maybe": want true or false (see coordinator --help)`},
		{[]string{"--prepare-timeout", "0s"}, 2, "coordinator: --prepare-timeout 0s: want more than 0"},
		{[]string{"--prepare-timeout", "-5s"}, 2, "--prepare-timeout -5s: want more than 0"},
		{[]string{"--prepare-timeout", "soon"}, 2, `--prepare-timeout "soon": not a duration`},
		{[]string{"--log-level", "loud"}, 2, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--tls-ca", missing, "--tls-cert", missing, "--tls-key", missing}, 1, missing},
	} {
		var stderr bytes.Buffer
		code := daemon.Execute(newCommand(), "coordinator", tc.args, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("coordinator %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

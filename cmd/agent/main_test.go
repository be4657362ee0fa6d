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
		{[]string{"--bogus"}, 2, "agent: unknown flag: --bogus (see agent --help)"},
		{[]string{"extra"}, 2, `agent: unknown command "extra" for "agent"`},
		{[]string{"--max-rate", "x"}, 2, `agent: --max-rate "x": not a number (see agent --help)`},
		{[]string{"--max-connections", "1.5"}, 2, `--max-connections "1.5": not a whole number`},
		{[]string{"--rejoin-interval", "soon"}, 2, `--rejoin-interval "soon": not a duration: want a number with a unit`},
		{[]string{"--local=maybe"}, 2, `--local "maybe": want true or false`},
		{[]string{"--max-rate", "-1"}, 2, "--max-rate -1: want 0 (no cap) or more"},
		{[]string{"--log-level", "loud"}, 2, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--allow-targets", "10.0.0.1/8"}, 2, "--allow-targets: "},
		{[]string{"--cpus", "x-y"}, 2, "--cpus: "},
		{[]string{"--tls-ca", missing, "--tls-cert", missing, "--tls-key", missing}, 1, missing},
	} {
		var stderr bytes.Buffer
		code := daemon.Execute(newCommand(), "agent", tc.args, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("agent %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

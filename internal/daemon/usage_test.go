package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExecuteStatusAndPortHint: Execute exits 2 on a usage error with the
// flag named in words (a misspelt flag with the one meant, never a hidden
// one), 1 on a run error, and a port another process holds gets what to
// do on one host.
func TestExecuteStatusAndPortHint(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	newCmd := func() *cobra.Command {
		var n int
		cmd := &cobra.Command{Use: "d", Args: cobra.NoArgs, SilenceUsage: true, SilenceErrors: true,
			RunE: func(*cobra.Command, []string) error {
				if n < 0 {
					return Usage(errors.New("--n: want 0 or more"))
				}
				ln, err := net.Listen("tcp", held.Addr().String())
				if err == nil {
					ln.Close()
					return errors.New("bound a held port")
				}
				return fmt.Errorf("listen grpc on %s: %w", held.Addr(), err)
			}}
		cmd.Flags().IntVar(&n, "n", 0, "")
		cmd.Flags().String("allow-targets", "", "")
		cmd.Flags().String("secret-knob", "", "")
		_ = cmd.Flags().MarkHidden("secret-knob")
		return cmd
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--n", "x"}, 2, `d: --n "x": not a number (see d --help)`},
		{[]string{"--n", "-1"}, 2, "d: --n: want 0 or more\n"},
		{[]string{"extra"}, 2, `d: unknown command "extra" for "d"`},
		{[]string{"--alow-targets", "x"}, 2, "d: unknown flag: --alow-targets; did you mean --allow-targets? (see d --help)"},
		{[]string{"--allow-target=x"}, 2, "d: unknown flag: --allow-target; did you mean --allow-targets? (see d --help)"},
		{[]string{"--secret-knb", "x"}, 2, "d: unknown flag: --secret-knb (see d --help)"},
		{[]string{"--zzzz"}, 2, "d: unknown flag: --zzzz (see d --help)"},
		{nil, 1, "address already in use (another process holds that port, perhaps another member on this host: give each member its own --grpc-addr and --gossip-addr ports"},
	} {
		var stderr bytes.Buffer
		code := Execute(newCmd(), "d", tc.args, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("Execute(%q) = %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

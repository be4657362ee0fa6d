// Command coordctl is Phalanx's command-line client: it submits plans to the
// coordinator with wrk's flags, shows progress and prints the merged report.
//
//	coordctl demo                                   # everything in one process, on loopback
//	coordctl --coordinator 10.0.0.1:7000 agents
//	coordctl run -c750 -d1m --latency https://target.example/
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/daemon"
	"github.com/phalanxload/phalanx/internal/version"
)

// CoordinatorEnv names the environment variable that sets the default
// coordinator address.
const CoordinatorEnv = "PHALANX_COORDINATOR"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes coordctl with args and returns the exit status: 0 on
// success, 1 on any error (printed to stderr), 2 on bad usage, 3 when a
// signal stopped a run early, 4 when the run lost an agent (a partial
// report), 5 when coordctl lost the coordinator (its own partial report),
// 128 + the signal's number when a second signal abandoned the run.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		var xe *exitError
		if errors.As(err, &xe) {
			if xe.err != nil {
				fmt.Fprintln(stderr, "coordctl:", describe(xe.err))
			}
			return xe.code
		}
		err = unknownCommand(err)
		fmt.Fprintln(stderr, "coordctl:", describe(err))
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks a bad command line (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// unknownCommand makes cobra's unknown-command error (an unknown
// subcommand, or an argument to a command that takes none) a usage error
// on one line, with cobra's suggestions. Cobra has no error type for it,
// only this message: "unknown command "x" for "coordctl"", then "Did you
// mean this?" and one indented suggestion per line.
func unknownCommand(err error) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "unknown command ") {
		return err
	}
	first, rest, _ := strings.Cut(msg, "\n")
	var suggestions []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "\t") {
			suggestions = append(suggestions, strconv.Quote(strings.TrimSpace(line)))
		}
	}
	if len(suggestions) > 0 {
		first += "; did you mean " + strings.Join(suggestions, " or ") + "?"
	}
	return &usageError{fmt.Errorf("%s (see coordctl --help)", first)}
}

// flagHints explain flags of wrk, wrk2, h2load and httpress that coordctl
// run does not have, keyed as pflag names them in its unknown-flag errors.
var flagHints = map[string]string{
	"-t":        "threads are per agent: each agent runs one worker per CPU it may use (agent --cpus); scale with -c and more agents",
	"--threads": "threads are per agent: each agent runs one worker per CPU it may use (agent --cpus); scale with -c and more agents",
	"-s":        "Lua scripts are not supported: use -X, -H and --body, or --mix for several requests",
	"--script":  "Lua scripts are not supported: use -X, -H and --body, or --mix for several requests",
	"-k":        "keep-alive is on by default (--no-keepalive turns it off); for curl's -k use --insecure",
	"-D":        "h2load's -D is -d/--duration here",
	"--h1":      "HTTP/1.1 is the default; --http2 selects HTTP/2",
	"-i":        "for several URLs use --mix FILE",
}

// flagHint returns the hint for the flag an unknown-flag error names, or "".
func flagHint(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: '"); ok {
		name, _, _ := strings.Cut(rest, "'")
		return flagHints["-"+name]
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: "); ok {
		return flagHints[name]
	}
	return ""
}

// describe turns gRPC status errors into their message, naming the code
// only where it helps.
func describe(err error) string {
	var st *status.Status
	ok := false
	if inner := errors.Unwrap(err); inner != nil {
		st, ok = status.FromError(inner)
	}
	if !ok {
		st, ok = status.FromError(err)
	}
	if !ok {
		return err.Error()
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Sprintf("%s (%s)", unwrapPrefix(err), st.Message())
	}
	return st.Message()
}

// unwrapPrefix returns the context before a wrapped status error.
func unwrapPrefix(err error) string {
	var pe *prefixedError
	if errors.As(err, &pe) {
		return pe.prefix
	}
	return "request failed"
}

// prefixedError adds context to a gRPC error without hiding its status.
type prefixedError struct {
	prefix string
	err    error
}

func (e *prefixedError) Error() string { return e.prefix + ": " + e.err.Error() }
func (e *prefixedError) Unwrap() error { return e.err }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	var co coordinatorFlags
	root := &cobra.Command{
		Use:           "coordctl",
		Short:         "Run distributed HTTPS load tests on a Phalanx cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = daemon.FlagValueError(err)
		if hint := flagHint(err); hint != "" {
			return &usageError{fmt.Errorf("%w; %s (see %s --help)", err, hint, c.CommandPath())}
		}
		if s := daemon.FlagSuggestion(c, err); s != "" {
			return &usageError{fmt.Errorf("%w; %s (see %s --help)", err, s, c.CommandPath())}
		}
		return &usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	def := os.Getenv(CoordinatorEnv)
	if def == "" {
		def = coordinator.DefaultConfig().GRPCAddr
	}
	root.PersistentFlags().StringVar(&co.addr, "coordinator", def, "coordinator gRPC address HOST:PORT (env "+CoordinatorEnv+")")
	tlsFlags := daemon.TLSFlags(root.PersistentFlags(), &co.tls)
	clusterFlagNames := append([]string{"coordinator"}, tlsFlags...)
	scopeClusterFlags(root, clusterFlagNames)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkClusterFlags(root, cmd, clusterFlagNames); err != nil {
			return err
		}
		if err := daemon.BindEnv(cmd.Flags(), tlsFlags...); err != nil {
			return &usageError{err}
		}
		co.tls.From = daemon.Origins(cmd.Flags(), tlsFlags...)
		return nil
	}
	root.AddCommand(newAgentsCmd(&co), newRunCmd(&co), newSearchCmd(&co), newCompareCmd(&co), newABCmd(&co), offline(newDemoCmd()), offline(newTargetCmd()), offline(newTLSCmd()), offline(newKeygenCmd()), newKeyringCmd(&co))
	root.AddCommand(newStoreCmds(&co)...)
	return root
}

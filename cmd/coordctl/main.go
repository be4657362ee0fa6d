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

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CoordinatorEnv names the environment variable that sets the default
// coordinator address.
const CoordinatorEnv = "PHALANX_COORDINATOR"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes coordctl with args and returns the exit status: 0 on
// success, 1 on any error (printed to stderr), 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
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

// describe turns gRPC status errors into their message, naming the code
// only where it helps.
func describe(err error) string {
	st, ok := status.FromError(errors.Unwrap(err))
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
	var coordAddr string
	root := &cobra.Command{
		Use:           "coordctl",
		Short:         "Run distributed HTTPS load tests on a Phalanx cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	def := os.Getenv(CoordinatorEnv)
	if def == "" {
		def = "127.0.0.1:7000"
	}
	root.PersistentFlags().StringVar(&coordAddr, "coordinator", def, "coordinator gRPC address HOST:PORT (env "+CoordinatorEnv+")")
	root.AddCommand(newAgentsCmd(&coordAddr), newRunCmd(&coordAddr), newDemoCmd(), newTargetCmd())
	return root
}

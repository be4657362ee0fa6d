package daemon

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/plan"
)

// Exit statuses shared by agent, coordinator and coordctl (README, Exit
// status): 0 success, 1 a run error, 2 a bad command line.
const (
	ExitError = 1
	ExitUsage = 2
)

// UsageError marks a bad command line: an unknown flag or argument, or a
// flag value that is malformed or out of its range. Its exit status is
// ExitUsage; every other error's is ExitError.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError (nil stays nil).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{err}
}

// ExitStatus returns the exit status for err: 0 for nil, ExitUsage for a
// UsageError, else ExitError.
func ExitStatus(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitError
}

// FlagName names a flag as errors do: "-c/--connections", "--rate".
func FlagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// FlagValueError restates pflag's error for a value a flag refused
// (`invalid argument "abc" for "-c, --connections" flag: strconv.ParseInt:
// parsing "abc": invalid syntax`) as the flag, the value and what is wrong
// with it in words: `-c/--connections "abc": not a number`. Other errors
// are returned as they are.
func FlagValueError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	return fmt.Errorf("%s %q: %s", FlagName(f), ive.GetValue(), valueProblem(f.Value.Type(), ive.GetValue(), errors.Unwrap(ive)))
}

// valueProblem says in words why value, given to a flag of type typ
// (pflag's Value.Type: "int", "duration", "bool", ...), was refused with
// cause.
func valueProblem(typ, value string, cause error) string {
	var ne *strconv.NumError
	switch {
	case typ == "bool":
		return "want true or false"
	case errors.As(cause, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		return "out of range for " + typ
	case errors.As(cause, &ne) && (strings.HasPrefix(typ, "uint") || strings.HasPrefix(typ, "int")):
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return "not a whole number"
		}
		return "not a number"
	case errors.As(cause, &ne):
		return "not a number"
	case typ == "duration" && cause != nil && strings.HasPrefix(cause.Error(), "time: "):
		// time.ParseDuration's message repeats the value.
		return "not a duration: want a number with a unit, e.g. 500ms, 10s, 1m"
	case cause != nil:
		return cause.Error()
	}
	return "invalid value"
}

// FlagSuggestion returns "did you mean --NAME?" for pflag's unknown-flag
// error (`unknown flag: --conections`) when one of c's flags, its own or
// inherited, is within plan.Closest's edit distance of the name given;
// else "". Hidden and deprecated flags are never suggested.
func FlagSuggestion(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	}
	c.Flags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	if s := plan.Closest(name, names); s != "" {
		return "did you mean --" + s + "?"
	}
	return ""
}

// Execute runs a daemon's command (agent, coordinator) with args and returns
// its exit status (ExitStatus), printing an error on stderr after name:
// "agent: ...". Unknown flags, arguments and refused flag values are usage
// errors (FlagValueError's wording), as RunE's own UsageErrors are.
func Execute(cmd *cobra.Command, name string, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if s := FlagSuggestion(c, err); s != "" {
			return Usage(fmt.Errorf("%w; %s (see %s --help)", err, s, c.CommandPath()))
		}
		return Usage(fmt.Errorf("%w (see %s --help)", FlagValueError(err), c.CommandPath()))
	})
	if validate := cmd.Args; validate != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := validate(c, a); err != nil {
				return Usage(fmt.Errorf("%w (see %s --help)", err, c.CommandPath()))
			}
			return nil
		}
	}
	err := cmd.Execute()
	if err != nil {
		fmt.Fprintln(stderr, name+":", err.Error()+portHint(err))
	}
	return ExitStatus(err)
}

// portHint returns what to do about a port another process holds (a
// second member on one host started with the first's ports, the default
// ones), to append to err's message, or "".
func portHint(err error) string {
	if !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
		return ""
	}
	return " (another process holds that port, perhaps another member on this host: give each member its own --grpc-addr and --gossip-addr ports; README \"On one machine\")"
}

// Package selfexec starts the running test binary again as a helper
// process (a server, simulated agents) for benchmarks that must measure
// their own process alone: the helper's CPU is not the benchmark's. The
// benchmark's TestMain looks for the environment variable it is given and,
// when set, serves instead of running tests; the helper prints the
// address it serves on as its first line of output and exits when its
// standard input closes. It is for tests only.
package selfexec

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Start runs os.Args[0] with env=1 added to the environment, waits for
// the first line it prints (its address) and returns it with the
// process's pid. The process's standard input is closed, and the process
// waited for, at the end of tb.
func Start(tb testing.TB, env string) (addr string, pid int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("helper process (%s): %v", env, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

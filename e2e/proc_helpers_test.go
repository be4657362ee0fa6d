package e2e

// Helpers for the end-to-end tests that run the built binaries (agent,
// coordinator, coordctl) as separate processes: building them once per
// package run, starting and stopping processes with their output captured,
// picking loopback ports, and waiting for the cluster to be ready.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Timing bounds of the process tests.
const (
	// procReadyTimeout bounds every wait for a daemon or the cluster to be
	// ready.
	procReadyTimeout = 15 * time.Second
	// procStopTimeout is how long a process may take to exit after SIGTERM
	// before it is killed (and the test fails, for a daemon).
	procStopTimeout = 5 * time.Second
	// procBuildTimeout bounds building the three binaries.
	procBuildTimeout = 3 * time.Minute
	// procPoll is the polling interval of every wait.
	procPoll = 25 * time.Millisecond
)

// procRaceEnv, set to "1", builds the binaries with -race; the process
// cleanups then fail the test on any data race report in their stderr.
const procRaceEnv = "PHALANX_E2E_RACE"

var (
	procBuildOnce sync.Once
	procBinDir    string
	procBuildErr  error
)

// procBinary returns the path of the built binary name ("agent",
// "coordinator" or "coordctl"), building all three on first use.
func procBinary(t testing.TB, name string) string {
	t.Helper()
	procBuildOnce.Do(func() { procBinDir, procBuildErr = procBuild() })
	if procBuildErr != nil {
		t.Fatalf("build binaries: %v", procBuildErr)
	}
	return filepath.Join(procBinDir, name)
}

// The version and commit the test binaries are stamped with (make build
// stamps git's), which --version and coordctl agents must show.
const (
	versionPkg  = "github.com/phalanxload/phalanx/internal/version"
	procVersion = "v0.0.0-e2e"
	procCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// procBuild builds ./cmd/{agent,coordinator,coordctl} of the module root
// ("..", the tests run in /e2e) into a fresh directory.
func procBuild() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	if !bytes.Contains(mod, []byte("module github.com/phalanxload/phalanx\n")) {
		return "", fmt.Errorf("%s/go.mod is not github.com/phalanxload/phalanx's", root)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go command: %w", err)
	}
	dir, err := procBuildDir()
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator),
		"-ldflags", "-X " + versionPkg + ".Version=" + procVersion + " -X " + versionPkg + ".Commit=" + procCommit}
	if os.Getenv(procRaceEnv) == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/agent", "./cmd/coordinator", "./cmd/coordctl")
	ctx, cancel := context.WithTimeout(context.Background(), procBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", goBin, strings.Join(args, " "), err, out)
	}
	return dir, nil
}

// procBuildDir returns a new directory for the binaries. Under go test, the
// test binary runs from go's work directory ($WORK/b001), which go test
// removes when it ends: the binaries go there, so nothing outlives the run.
// Otherwise (a test binary run by hand) it is a new temporary directory
// that is left behind.
func procBuildDir() (string, error) {
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if regexp.MustCompile(`^b\d+$`).MatchString(filepath.Base(d)) &&
			strings.HasPrefix(filepath.Base(filepath.Dir(d)), "go-build") {
			return os.MkdirTemp(d, "phalanx-bin-")
		}
	}
	return os.MkdirTemp("", "phalanx-e2e-bin-")
}

// syncBuffer is a bytes.Buffer safe for concurrent Write and String.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a child process started by startProc, with its stdout and stderr
// captured.
type proc struct {
	t      testing.TB
	name   string
	args   []string
	cmd    *exec.Cmd
	daemon bool // must run until the cleanup's SIGTERM, then exit 0

	stdout, stderr syncBuffer
	done           chan struct{} // closed when the process has exited and its output is copied
	waitErr        error         // cmd.Wait's result; read only after done is closed

	// mayExit is set when the test kills the process or expects it to
	// exit: the cleanup then checks neither its exit nor its status.
	mayExit atomic.Bool
}

// procEnv is the environment of every child: this process's, without the
// PHALANX_ variables (a stray PHALANX_COORDINATOR or clock shift would
// change what is tested), plus extra.
func procEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PHALANX_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startProc starts bin with args. A daemon must still run when the test
// ends (unless mayExit is set); a t.Cleanup then sends it SIGTERM, waits up
// to procStopTimeout, kills it if needed and fails the test unless it
// exited with status 0. Any process still running at cleanup is stopped the
// same way. The cleanup fails the test on a panic, fatal error or data race
// report in the output, and logs the output when the test failed.
func startProc(t testing.TB, name string, daemon bool, env []string, bin string, args ...string) *proc {
	t.Helper()
	args = withDataDir(t, bin, args)
	p := &proc{t: t, name: name, args: args, daemon: daemon, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 2 * time.Second // don't hang on pipes held by a stray grandchild
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.cleanup)
	return p
}

// withDataDir gives a coordinator process started without --data-dir a
// run store of its own in a temporary directory: the default,
// /var/lib/phalanx, is one per host, and a second coordinator on it would
// not start.
func withDataDir(t testing.TB, bin string, args []string) []string {
	if filepath.Base(bin) != "coordinator" || slices.Contains(args, "--data-dir") {
		return args
	}
	return append(slices.Clone(args), "--data-dir", t.TempDir())
}

// Stdout and Stderr return the output captured so far.
func (p *proc) Stdout() string { return p.stdout.String() }
func (p *proc) Stderr() string { return p.stderr.String() }

// Exited reports whether the process has exited.
func (p *proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to exit and returns its exit code (-1
// when killed by a signal); ok is false if it was still running after d.
func (p *proc) Wait(d time.Duration) (code int, ok bool) {
	timer := time.NewTimer(max(d, 0))
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		if !p.Exited() {
			return 0, false
		}
	}
	return p.cmd.ProcessState.ExitCode(), true
}

// Kill sends SIGKILL and returns without waiting; the cleanup no longer
// expects a clean exit.
func (p *proc) Kill() {
	p.t.Helper()
	p.mayExit.Store(true)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("kill %s: %v", p.name, err)
	}
}

// describe returns the command line and the tails of the output, for
// failure messages.
func (p *proc) describe() string {
	tail := func(s string) string {
		const limit = 6000
		if len(s) > limit {
			s = "..." + s[len(s)-limit:]
		}
		return strings.TrimRight(s, "\n")
	}
	state := "running"
	if p.Exited() {
		state = p.cmd.ProcessState.String()
	}
	return fmt.Sprintf("--- %s (%s): %s %s\n--- stdout:\n%s\n--- stderr:\n%s",
		p.name, state, filepath.Base(p.cmd.Path), strings.Join(p.args, " "), tail(p.Stdout()), tail(p.Stderr()))
}

// crashRE matches what a Go program prints when it crashes or races.
var crashRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE)`)

func (p *proc) cleanup() {
	t := p.t
	ranToEnd := !p.Exited()
	if ranToEnd {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("%s: SIGTERM: %v", p.name, err)
		}
		select {
		case <-p.done:
		case <-time.After(procStopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not exit within %v of SIGTERM; killed\n%s", p.name, procStopTimeout, p.describe())
			return
		}
	}
	switch {
	case crashRE.MatchString(p.Stderr()) || crashRE.MatchString(p.Stdout()):
		t.Errorf("%s crashed or raced\n%s", p.name, p.describe())
	case p.daemon && !p.mayExit.Load() && !ranToEnd:
		t.Errorf("%s exited before the test ended (%v)\n%s", p.name, p.waitErr, p.describe())
	case p.daemon && !p.mayExit.Load() && p.waitErr != nil:
		t.Errorf("%s did not exit cleanly on SIGTERM: %v\n%s", p.name, p.waitErr, p.describe())
	case t.Failed():
		t.Logf("%s", p.describe())
	}
}

// runCoordctl runs coordctl with args to completion (at most timeout) and
// returns its output and exit code.
func runCoordctl(t testing.TB, timeout time.Duration, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, "coordctl", false, env, procBinary(t, "coordctl"), args...)
	code, ok := p.Wait(timeout)
	if !ok {
		t.Fatalf("coordctl %s did not exit within %v\n%s", strings.Join(args, " "), timeout, p.describe())
	}
	return p.Stdout(), p.Stderr(), code
}

// freePorts returns n distinct ports free for TCP and UDP on 127.0.0.1 (a
// gossip port is both). They are released before returning, so another
// process may take one: callers retry on "address already in use".
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var (
		ports   []int
		closers []func() error
	)
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a free port: %v", err)
		}
		closers = append(closers, ln.Close)
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // UDP side taken: try another
		}
		closers = append(closers, pc.Close)
		ports = append(ports, port)
	}
	return ports
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// procCluster is a coordinator process and its agent processes.
type procCluster struct {
	coord      *proc
	grpcAddr   string // coordinator's gRPC address, for coordctl --coordinator
	gossipAddr string // coordinator's gossip address, for agents' --join
	agents     []*proc
	tls        *procTLS // nil: every hop plaintext on loopback
	dataDir    string   // the coordinator's run store (--data-dir)
}

// procTLS is the mutual-TLS setup of a process cluster: its CA, and the
// files of the coordinator and of coordctl.
type procTLS struct {
	pki         *securitytest.PKI
	coordinator security.Files
	client      security.Files
}

func newProcTLS(t testing.TB) *procTLS {
	t.Helper()
	pki := securitytest.New(t)
	return &procTLS{
		pki:         pki,
		coordinator: pki.Files(t, security.RoleCoordinator, "proc-coordinator"),
		client:      pki.Files(t, security.RoleClient, "e2e"),
	}
}

// tlsArgs returns the flags that give a process the files f.
func tlsArgs(f security.Files) []string {
	return []string{"--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key}
}

// coordctlArgs returns coordctl's global flags to reach c's coordinator
// (with the client certificate when c has TLS), then args.
func (c *procCluster) coordctlArgs(args ...string) []string {
	out := []string{"--coordinator", c.grpcAddr}
	if c.tls != nil {
		out = append(out, tlsArgs(c.tls.client)...)
	}
	return append(out, args...)
}

// clientSecurity returns the credentials of a client of c's coordinator.
func (c *procCluster) clientSecurity(t testing.TB) security.Config {
	t.Helper()
	if c.tls == nil {
		return security.Config{}
	}
	sec, err := security.LoadFiles(security.RoleClient, c.tls.client)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// startProcCluster starts a coordinator process and n agent processes
// (named proc-agent-1...), and waits until the coordinator lists all n as
// idle.
func startProcCluster(t testing.TB, n int) *procCluster {
	t.Helper()
	return startProcClusterWith(t, n, nil)
}

// startProcClusterWith starts a cluster as startProcCluster does, with
// mutual TLS on every hop when tls is not nil.
func startProcClusterWith(t testing.TB, n int, tls *procTLS) *procCluster {
	t.Helper()
	c := startProcCoordinatorWith(t, tls)
	for i := range n {
		c.addAgent(t, fmt.Sprintf("proc-agent-%d", i+1))
	}
	return c
}

// bindRetries is how many times a daemon is started with fresh ports when
// another process took one of the ports picked for it.
const bindRetries = 3

// startProcCoordinator starts a coordinator process (without agents) and
// returns once it answers ListAgents.
func startProcCoordinator(t testing.TB) *procCluster {
	t.Helper()
	return startProcCoordinatorWith(t, nil)
}

// startProcCoordinatorWith starts a coordinator as startProcCoordinator
// does, with mutual TLS when tls is not nil.
func startProcCoordinatorWith(t testing.TB, tls *procTLS) *procCluster {
	t.Helper()
	return startProcCoordinatorIn(t, tls, t.TempDir())
}

// startProcCoordinatorIn starts a coordinator as startProcCoordinatorWith
// does, on run store dataDir (--data-dir).
func startProcCoordinatorIn(t testing.TB, tls *procTLS, dataDir string) *procCluster {
	t.Helper()
	bin := procBinary(t, "coordinator")
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		c := &procCluster{grpcAddr: loopback(ports[0]), gossipAddr: loopback(ports[1]), tls: tls, dataDir: dataDir}
		args := []string{"--grpc-addr", c.grpcAddr, "--gossip-addr", c.gossipAddr, "--name", "proc-coordinator", "--local", "--data-dir", dataDir}
		if tls != nil {
			args = append(args, tlsArgs(tls.coordinator)...)
		}
		c.coord = startProc(t, "coordinator", true, procEnv(), bin, args...)
		sec := c.clientSecurity(t)
		err := waitUntil(procReadyTimeout, c.coord, func(ctx context.Context) error {
			_, err := listAgentsWith(ctx, c.grpcAddr, sec)
			return err
		})
		if err == nil {
			return c
		}
		c.coord.mayExit.Store(true)
		if c.coord.Exited() && strings.Contains(c.coord.Stderr(), "address already in use") && attempt < bindRetries {
			t.Logf("coordinator: a port was taken before it could bind it; retrying\n%s", c.coord.describe())
			continue
		}
		t.Fatalf("coordinator not ready: %v\n%s", err, c.coord.describe())
	}
}

// addAgent starts an agent process named name that joins c, with extra
// flags args, and returns once the coordinator lists it as idle.
func (c *procCluster) addAgent(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	bin := procBinary(t, "agent")
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		flags := []string{"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
			"--join", c.gossipAddr, "--name", name, "--local"}
		if c.tls != nil {
			flags = append(flags, tlsArgs(c.tls.pki.Files(t, security.RoleAgent, name))...)
		}
		a := startProc(t, name, true, procEnv(), bin, append(flags, args...)...)
		err := waitUntil(procReadyTimeout, a, func(ctx context.Context) error {
			return c.agentsIdle(ctx, name)
		})
		if err == nil {
			c.agents = append(c.agents, a)
			return a
		}
		a.mayExit.Store(true)
		if a.Exited() && strings.Contains(a.Stderr(), "address already in use") && attempt < bindRetries {
			t.Logf("%s: a port was taken before it could bind it; retrying\n%s", name, a.describe())
			continue
		}
		t.Fatalf("agent %s not ready: %v\n%s\n%s", name, err, a.describe(), c.coord.describe())
	}
}

// waitIdle waits until the coordinator lists every agent of c as idle.
func (c *procCluster) waitIdle(t testing.TB) {
	t.Helper()
	var names []string
	for _, a := range c.agents {
		names = append(names, a.name)
	}
	if err := waitUntil(procReadyTimeout, c.coord, func(ctx context.Context) error {
		return c.agentsIdle(ctx, names...)
	}); err != nil {
		t.Fatalf("agents %v not idle: %v\n%s", names, err, c.coord.describe())
	}
}

// agentsIdle returns nil if the coordinator lists every named agent as
// idle, else an error saying what it lists.
func (c *procCluster) agentsIdle(ctx context.Context, names ...string) error {
	sec := security.Config{}
	if c.tls != nil {
		var err error
		if sec, err = security.LoadFiles(security.RoleClient, c.tls.client); err != nil {
			return err
		}
	}
	agents, err := listAgentsWith(ctx, c.grpcAddr, sec)
	if err != nil {
		return err
	}
	state := map[string]pb.AgentState{}
	for _, a := range agents {
		state[a.GetName()] = a.GetState()
	}
	for _, n := range names {
		if state[n] != pb.AgentState_AGENT_STATE_IDLE {
			return fmt.Errorf("agent %s is %v; coordinator lists %v", n, state[n], state)
		}
	}
	return nil
}

// listAgents calls the coordinator's ListAgents over plaintext gRPC.
func listAgents(ctx context.Context, addr string) ([]*pb.NodeMeta, error) {
	return listAgentsWith(ctx, addr, security.Config{})
}

// listAgentsWith calls the coordinator's ListAgents over gRPC with the
// client credentials sec.
func listAgentsWith(ctx context.Context, addr string, sec security.Config) ([]*pb.NodeMeta, error) {
	creds, err := sec.DialOption()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := pb.NewCoordinatorServiceClient(conn).ListAgents(ctx, &pb.ListAgentsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetAgents(), nil
}

// waitUntil calls check every procPoll until it returns nil, and returns
// nil; it returns check's last error once timeout has passed or watched
// (if not nil) has exited.
func waitUntil(timeout time.Duration, watched *proc, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if watched != nil && watched.Exited() {
			return fmt.Errorf("%s exited (%v); last check: %w", watched.name, watched.waitErr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w", timeout, err)
		case <-time.After(procPoll):
		}
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/cpuset"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// boundRun runs coordctl run with args against the process coordinator c
// and returns its JSON report (exit 0 wanted).
func boundRun(t *testing.T, c *procCluster, caFile string, args ...string) *report.Report {
	t.Helper()
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	argv := append([]string{"--coordinator", c.grpcAddr, "run", "--quiet", "--cacert", caFile, "--json", jsonFile}, args...)
	run := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), argv...)
	if code, ok := run.Wait(60 * time.Second); !ok || code != 0 {
		t.Fatalf("coordctl run: exit %d\n%s", code, run.describe())
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// startBoundAgents starts one agent process per name, each with args,
// joined to c, and waits until every one is idle.
func startBoundAgents(t *testing.T, c *procCluster, names []string, args ...string) {
	t.Helper()
	startAgentsUnder(t, c, names, nil, args...)
}

// startIdleAgents is startBoundAgents with every agent under the
// SCHED_IDLE policy (chrt --idle 0, util-linux; sched(7)): any
// normal-priority thread runnable on its CPU runs first, so a busy
// process there (spinOn) makes the agents' threads wait for the CPU
// whatever the target's speed. The agents' real-time start still raises
// the waiting thread to SCHED_FIFO and restores SCHED_IDLE after.
func startIdleAgents(t *testing.T, c *procCluster, names []string, args ...string) {
	t.Helper()
	chrt, err := exec.LookPath("chrt")
	if err != nil {
		t.Fatalf("chrt (util-linux) to run the agents under SCHED_IDLE: %v", err)
	}
	startAgentsUnder(t, c, names, []string{chrt, "--idle", "0"}, args...)
}

// startAgentsUnder starts the agents of startBoundAgents, each command
// line after the prefix wrap (none when nil).
func startAgentsUnder(t *testing.T, c *procCluster, names, wrap []string, args ...string) {
	t.Helper()
	for _, name := range names {
		ports := freePorts(t, 2)
		argv := append([]string{"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
			"--join", c.gossipAddr, "--name", name, "--local"}, args...)
		bin := procBinary(t, "agent")
		if len(wrap) > 0 {
			argv = append(append(slices.Clone(wrap[1:]), bin), argv...)
			bin = wrap[0]
		}
		a := startProc(t, name, true, procEnv(), bin, argv...)
		if err := waitUntil(procReadyTimeout, a, func(ctx context.Context) error { return c.agentsIdle(ctx, name) }); err != nil {
			t.Fatalf("agent %s not ready: %v\n%s", name, err, a.describe())
		}
	}
}

// TestServerBoundNotClientBound: an open-loop run at twice the capacity of
// a slow modelled server (2 workers of 20 ms: 100 requests/s) with a
// connection cap (4 connections, --max-connections 8) keeps every
// connection busy and sends late: the report calls it server-bound, not
// client-bound, while the one agent's CPU is nowhere near busy (the
// verdict the issue found firing on a saturated server).
func TestServerBoundNotClientBound(t *testing.T) {
	srv, ca := targettest.StartConfig(t, target.Config{Workers: 2, ServiceTime: 20 * time.Millisecond})
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	startBoundAgents(t, c, []string{"slow-agent"})
	r := boundRun(t, c, caFile, "-R", "200", "-c", "4", "--max-connections", "8", "-d", "3s", "--timeout", "2s", srv.URL())
	t.Logf("missed %d, backlogged %d, unsent %d of %d issued; client-bound %v %q; server-bound %v %q",
		r.Missed, r.Backlogged, r.Unsent, r.Issued, r.ClientBound, r.ClientBoundReasons, r.ServerBound, r.ServerBoundReasons)
	if r.ClientBound {
		t.Errorf("client-bound %q: want server-bound (every connection busy at the cap, the agent idle)", r.ClientBoundReasons)
	}
	if !r.ServerBound || len(r.ServerBoundReasons) == 0 {
		t.Errorf("server-bound %v: want it, the server's 100/s behind a 200/s schedule", r.ServerBound)
	}
	if r.Backlogged == 0 || r.Backlogged > r.Missed {
		t.Errorf("backlogged %d of %d missed: want most", r.Backlogged, r.Missed)
	}
}

// TestClientBoundSharedCPU: two agent processes pinned (--cpus) to the
// same CPU under closed-loop load, sharing it with a busy process that
// runs before them (startIdleAgents, spinOn): neither is 90 % busy, but
// each one's threads wait for the CPU, and the report calls the run
// client-bound naming both by their run-queue delay, not server-bound.
// Without the busy process the in-process target, not the agents, is the
// limit on a quiet machine (agents 13-19 % busy, waits at 0.25-0.31 s per
// second, around the rule's limit), so which side of it a run fell on
// was the kernel's choice.
func TestClientBoundSharedCPU(t *testing.T) {
	pin := lastAllowedCPU(t)
	srv, ca := targettest.Start(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	names := []string{"shared-a", "shared-b"}
	startIdleAgents(t, c, names, "--cpus", pin)
	stop := spinOn(t, pin, 30*time.Second)
	r := boundRun(t, c, caFile, "-c", "32", "-d", "3s", srv.URL())
	stop()
	for _, a := range r.AgentRows {
		t.Logf("agent %s: cpu %.0f %%, run-queue wait %.0f %% (%.2fs), pinned %s", a.Name, 100*a.CPUUtil, 100*a.CPUWait, a.CPUWaitS, a.CPUList)
		if a.CPUWait <= report.ClientWaitLimit {
			t.Errorf("agent %s under SCHED_IDLE on CPU %s beside a busy process waited %.2fs per second, want over the limit %.2f",
				a.Name, pin, a.CPUWait, report.ClientWaitLimit)
		}
	}
	if !r.ClientBound {
		t.Fatalf("agents waiting for CPU %s: not client-bound", pin)
	}
	if r.ServerBound {
		t.Errorf("client- and server-bound at once: %q", r.ServerBoundReasons)
	}
	reasons := strings.Join(r.ClientBoundReasons, "; ")
	for _, name := range names {
		if !strings.Contains(reasons, "agent "+name+"'s threads waited for a CPU") {
			t.Errorf("reasons %q: want agent %s named by its CPU wait", reasons, name)
		}
	}
}

// lastAllowedCPU returns the last CPU this process may use, for agents
// pinned together with --cpus; it skips without /proc, schedstat or a
// second CPU (the target would share the agents' one).
func lastAllowedCPU(t *testing.T) string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	allowed, err := cpuset.Parse(statusField(string(status), "Cpus_allowed_list"))
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skip("one CPU: the target would share the agents' CPU")
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err != nil {
		t.Skip("no schedstat: ", err)
	}
	return cpuset.Format(allowed[len(allowed)-1:])
}

// spinOn keeps a process busy on CPU cpu (taskset, util-linux) until the
// returned stop is called, the test ends, or limit passes, whichever is
// first: this test binary again, with spinEnv set (TestMain), spinning
// spinBusy of every spinBusy+spinIdle. The pauses leave agents under
// SCHED_IDLE (startIdleAgents) a quarter of the CPU, enough to run and
// stop their share; while it spins, every one of their runnable threads
// waits. A process, not a thread of this one: a spinning goroutine holds
// one of this process's Ps, which the in-process target needs.
func spinOn(t *testing.T, cpu string, limit time.Duration) (stop func()) {
	t.Helper()
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("taskset (util-linux) to pin a busy process to CPU %s: %v", cpu, err)
	}
	cmd := exec.Command(taskset, "-c", cpu, os.Args[0])
	cmd.Env = append(os.Environ(), spinEnv+"="+limit.String())
	// Its own process group, killed whole, as the limit alone would leave
	// a stray spinner behind a test that died.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a busy process on CPU %s: %v", cpu, err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// spinEnv, set to a duration, makes the test binary spinOn's busy
// process for that long (TestMain).
const spinEnv = "PHALANX_E2E_SPIN"

// The busy process's duty cycle: spinBusy spinning, then spinIdle asleep.
const (
	spinBusy = 9 * time.Millisecond
	spinIdle = 3 * time.Millisecond
)

// spinMain is the busy process: it spins and sleeps by turns for the
// duration limit and returns its exit status (2 for a bad limit).
func spinMain(limit string) int {
	d, err := time.ParseDuration(limit)
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a positive duration\n", spinEnv, limit)
		return 2
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		for busy := time.Now().Add(spinBusy); time.Now().Before(busy); {
		}
		time.Sleep(spinIdle)
	}
	return 0
}

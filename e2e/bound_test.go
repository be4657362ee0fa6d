package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, name := range names {
		ports := freePorts(t, 2)
		argv := append([]string{"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
			"--join", c.gossipAddr, "--name", name, "--local"}, args...)
		a := startProc(t, name, true, procEnv(), procBinary(t, "agent"), argv...)
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
// same CPU under closed-loop load share it: neither is 90 % busy, but
// each one's threads wait for the CPU while the other runs, and the
// report calls the run client-bound naming both by their run-queue delay.
func TestClientBoundSharedCPU(t *testing.T) {
	pin := lastAllowedCPU(t)
	srv, ca := targettest.Start(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	names := []string{"shared-a", "shared-b"}
	startBoundAgents(t, c, names, "--cpus", pin)
	// On a quiet machine the in-process target, not the agents, is the
	// limit (agents 10 % busy each, run-queue wait 20 %): a process
	// spinning on the agents' CPU for the run makes the CPU they share a
	// busy one, as on a client machine running something else.
	stop := spinOn(t, pin, 30*time.Second)
	r := boundRun(t, c, caFile, "-c", "32", "-d", "3s", srv.URL())
	stop()
	var contended []string
	for _, a := range r.AgentRows {
		t.Logf("agent %s: cpu %.0f %%, run-queue wait %.0f %% (%.2fs), pinned %s", a.Name, 100*a.CPUUtil, 100*a.CPUWait, a.CPUWaitS, a.CPUList)
		if a.CPUWaitS <= 0 {
			t.Errorf("agent %s sharing CPU %s with another agent and a busy process reported no run-queue delay", a.Name, pin)
		}
		if a.CPUWait > report.ClientWaitLimit || a.CPUUtil > report.ClientBusyLimit {
			contended = append(contended, a.Name)
		}
	}
	if r.ServerBound {
		t.Errorf("client- and server-bound at once: %q", r.ServerBoundReasons)
	}
	if len(contended) == 0 {
		// How long a waking agent waits behind a busy process is the
		// kernel scheduler's choice: 16-44 % of the time in runs of this
		// test on one 2-core machine. Below the rule's limit the verdict
		// must stay silent (checked above), and the rule itself is judged
		// by TestCPUWaitBound on exact figures.
		if r.ClientBound {
			t.Errorf("client-bound %q with every agent under the limits", r.ClientBoundReasons)
		}
		t.Skipf("the shared CPU %s was not contended past the %.0f %% run-queue limit on this machine this time", pin, 100*report.ClientWaitLimit)
	}
	if !r.ClientBound {
		t.Fatalf("agents %v on CPU %s past the run-queue limit: not client-bound", contended, pin)
	}
	reasons := strings.Join(r.ClientBoundReasons, "; ")
	for _, name := range contended {
		if !strings.Contains(reasons, "agent "+name+"'s threads waited for a CPU") && !strings.Contains(reasons, "agent "+name+"'s CPUs were") {
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

// spinOn keeps a process busy on CPU cpu (taskset, a shell loop) until
// the returned stop is called, the test ends, or limit passes, whichever
// is first. A process, not a thread of this one: a spinning goroutine
// holds one of this process's Ps, which the in-process target needs.
func spinOn(t *testing.T, cpu string, limit time.Duration) (stop func()) {
	t.Helper()
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("taskset (util-linux) to pin a busy process to CPU %s: %v", cpu, err)
	}
	cmd := exec.Command(taskset, "-c", cpu, "timeout", strconv.Itoa(int(limit.Seconds())), "sh", "-c", "while :; do :; done")
	// Its own process group, killed whole: SIGKILL to timeout(1) alone
	// leaves its shell spinning, orphaned, after the test (seen: a
	// spinner 10 minutes old on a CI machine).
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

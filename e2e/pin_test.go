package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/cpuset"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestAgentPinsEveryThread starts an agent with --cpus set to one CPU and,
// while it generates load, reads /proc/PID/task/*/status: every thread of
// the agent (load generation included) must be allowed on exactly that set,
// and the report must give the pin map.
func TestAgentPinsEveryThread(t *testing.T) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	allowed, err := cpuset.Parse(statusField(string(status), "Cpus_allowed_list"))
	if err != nil {
		t.Fatal(err)
	}
	pin := cpuset.Format(allowed[len(allowed)-1:]) // the last allowed CPU
	testAgentPinned(t, nil, pin, "--cpus", pin)
}

// testAgentPinned starts an agent with args under the command wrap (none,
// or taskset and its arguments), runs a load through it and checks that
// every one of its threads is allowed on exactly the set pin, and that the
// report gives pin as its pin map with one CPU per pinned CPU.
func testAgentPinned(t *testing.T, wrap []string, pin string, args ...string) {
	t.Helper()
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	ports := freePorts(t, 2)
	argv := append(append(wrap, procBinary(t, "agent"),
		"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
		"--join", c.gossipAddr, "--name", "pinned-agent", "--local"), args...)
	a := startProc(t, "pinned-agent", true, procEnv(), argv[0], argv[1:]...)
	if err := waitUntil(procReadyTimeout, a, func(ctx context.Context) error { return c.agentsIdle(ctx, "pinned-agent") }); err != nil {
		t.Fatalf("agent not ready: %v\n%s", err, a.describe())
	}

	jsonFile := filepath.Join(t.TempDir(), "r.json")
	run := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"),
		"--coordinator", c.grpcAddr, "run", "-c", "8", "-d", "3s", "--cacert", caFile, "--json", jsonFile, srv.URL())
	// Wait until the agent is generating load, then read its threads.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Requests() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if srv.Requests() == 0 {
		t.Fatalf("no load reached the target\n%s\n%s", a.describe(), run.describe())
	}
	pid := a.cmd.Process.Pid
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads of %d: %v, %v", pid, tasks, err)
	}
	checked := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		checked++
		if got := statusField(string(b), "Cpus_allowed_list"); got != pin {
			t.Errorf("%s: Cpus_allowed_list = %q, want %q", f, got, pin)
		}
	}
	if checked < 2 {
		t.Fatalf("read %d thread status files", checked)
	}
	if code, ok := run.Wait(30 * time.Second); !ok || code != 0 {
		t.Fatalf("coordctl run: exit %d\n%s", code, run.describe())
	}
	var rep struct {
		Agents []struct {
			CPUList string `json:"cpu_list"`
			CPUs    int    `json:"cpus"`
		} `json:"agents"`
		Provenance *report.Provenance `json:"provenance"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	set, err := cpuset.Parse(pin)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Agents) != 1 || rep.Agents[0].CPUList != pin || rep.Agents[0].CPUs != len(set) {
		t.Fatalf("report agents %+v, want cpu_list %q and %d cpus", rep.Agents, pin, len(set))
	}
	// The provenance is the agent process's: this host, its pin map, the
	// version the binaries were stamped with, the CPUs online (however the
	// agent is pinned).
	host, _ := os.Hostname()
	if pv := rep.Provenance; pv == nil || len(pv.Agents) != 1 || pv.Agents[0].AgentProvenance == nil {
		t.Fatalf("provenance %+v", pv)
	}
	pa := rep.Provenance.Agents[0]
	online, _ := cpuset.Parse(strings.TrimSpace(readOr(t, "/sys/devices/system/cpu/online")))
	if pa.CPUList != pin || pa.CPUs != 1 || pa.Hostname != host || pa.AgentVersion != procVersion || pa.AgentCommit != procCommit ||
		rep.Provenance.CoordinatorVersion != procVersion || (len(online) > 0 && int(pa.CPUCount) != len(online)) || pa.Kernel == "" {
		t.Errorf("agent provenance %+v (row %+v), want host %q, pin %q, version %q/%q, %d CPUs online", pa.AgentProvenance, pa, host, pin, procVersion, procCommit, len(online))
	}
}

// readOr returns file's content, or "" (logged) when it cannot be read.
func readOr(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Log(err)
	}
	return string(b)
}

func statusField(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tasksetPin returns taskset's path and a CPU of this process's set that
// narrows it (the last allowed CPU), skipping when the machine has a single
// CPU online, so that no set can be narrower.
func tasksetPin(t *testing.T) (taskset string, pin int) {
	t.Helper()
	allowed, err := cpuset.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	online, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	if len(online) < 2 {
		t.Skipf("one CPU online (%s): no narrower set to start the agent in", cpuset.Format(online))
	}
	// taskset is util-linux's, which Debian installs everywhere.
	taskset, err = exec.LookPath("taskset")
	if err != nil {
		t.Fatal(err)
	}
	return taskset, allowed[len(allowed)-1]
}

// TestAgentInheritsCPUSet: an agent started inside a cpuset (taskset -c, as
// a container's cpuset or the kubelet's static CPU manager leaves it) and
// given no --cpus keeps every thread on that set, sizes its workers to it
// and reports it as its pin map.
func TestAgentInheritsCPUSet(t *testing.T) {
	taskset, pin := tasksetPin(t)
	set := strconv.Itoa(pin)
	testAgentPinned(t, []string{taskset, "-c", set}, set)
}

// TestAgentRefusesCPUsOutsideItsSet: inside a cpuset, --cpus naming a CPU
// outside it is refused at start, naming the CPU and the usable list.
func TestAgentRefusesCPUsOutsideItsSet(t *testing.T) {
	taskset, pin := tasksetPin(t)
	other := pin - 1 // another CPU online (tasksetPin took the last allowed)
	if other < 0 {
		other = pin + 1
	}
	ports := freePorts(t, 2)
	a := startProc(t, "agent", false, procEnv(), taskset, "-c", strconv.Itoa(pin), procBinary(t, "agent"),
		"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]), "--local", "--cpus", strconv.Itoa(other))
	code, ok := a.Wait(procReadyTimeout)
	if !ok || code != 1 {
		t.Fatalf("agent --cpus %d inside cpuset %d: exit %d (exited: %v), want 1\n%s", other, pin, code, ok, a.describe())
	}
	want := fmt.Sprintf("agent: --cpus %d: CPU %d is not available; this process may use %d\n", other, other, pin)
	if a.Stderr() != want {
		t.Errorf("stderr = %q, want %q", a.Stderr(), want)
	}
}

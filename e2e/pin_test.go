package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	ports := freePorts(t, 2)
	a := startProc(t, "pinned-agent", true, procEnv(), procBinary(t, "agent"),
		"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
		"--join", c.gossipAddr, "--name", "pinned-agent", "--local", "--cpus", pin)
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
	if len(rep.Agents) != 1 || rep.Agents[0].CPUList != pin || rep.Agents[0].CPUs != 1 {
		t.Fatalf("report agents %+v, want cpu_list %q and 1 cpu", rep.Agents, pin)
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

package report_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestServerBound: an open-loop run whose late sends found every
// connection busy (a backlog at the cap), with a send lateness p99 of
// 40 ms and the agents' CPUs 34 % busy, is server-bound, not
// client-bound (the verdict the issue found wrong both ways); the same
// run with its sends late by the agent's own scheduling is client-bound.
func TestServerBound(t *testing.T) {
	res := openResult(t, 40000)
	res.Agents[0].CpuTime = durationpb.New(1360 * time.Millisecond) // 34 % of 2 CPUs × 2 s
	res.Counters.Missed, res.Counters.Backlogged, res.Counters.Unsent = 300, 290, 40
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientBound || !r.ServerBound || len(r.ServerBoundReasons) != 1 {
		t.Fatalf("backlogged: client-bound %v %q, server-bound %v %q; want server-bound only", r.ClientBound, r.ClientBoundReasons, r.ServerBound, r.ServerBoundReasons)
	}
	if want := "290 of 1045 scheduled sends (27.8 %) found every connection busy (40 unsent), with the agents' CPUs at most 34 % busy"; r.ServerBoundReasons[0] != want {
		t.Errorf("server-bound reason %q, want %q", r.ServerBoundReasons[0], want)
	}
	var text strings.Builder
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Server-bound: 290 of 1045") || strings.Contains(text.String(), "client-bound") {
		t.Errorf("text:\n%s", text.String())
	}

	res.Counters.Backlogged = 40 // only the unsent: 260 late by the agent
	if r, err = wire.ReportFromResult(res); err != nil {
		t.Fatal(err)
	}
	if !r.ClientBound || r.ServerBound {
		t.Fatalf("late by the agent: client-bound %v %q, server-bound %v; want client-bound", r.ClientBound, r.ClientBoundReasons, r.ServerBound)
	}
	if want := "260 of 1045 scheduled sends (24.9 %) started late by the agents' own scheduling"; !strings.Contains(strings.Join(r.ClientBoundReasons, "|"), want) {
		t.Errorf("reasons %q, want %q among them", r.ClientBoundReasons, want)
	}
}

// TestCPUWaitBound: an agent at 50 % CPU whose threads waited for a CPU
// 0.5 s per second per CPU (two agents on one CPU) is client-bound, named;
// at 0.2 it is not; a wait summed over threads beyond the window times the
// CPUs is stated per second per CPU, never as over 100 % of the time.
func TestCPUWaitBound(t *testing.T) {
	res := result(t)
	res.Agents[0].CpuTime = durationpb.New(2 * time.Second) // 50 % of 2 CPUs × 2 s
	res.Agents[0].CpuWait = durationpb.New(2 * time.Second)
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	want := "agent agent-1's threads waited for a CPU 0.50s per second per CPU (run-queue delay 2.00s summed over its threads, 2 CPUs; its CPUs 50 % busy)"
	if !r.ClientBound || len(r.ClientBoundReasons) != 1 || r.ClientBoundReasons[0] != want {
		t.Fatalf("client-bound %v, reasons %q; want %q", r.ClientBound, r.ClientBoundReasons, want)
	}
	if a := r.AgentRows[0]; a.CPUWait != 0.5 || a.CPUWaitS != 2 {
		t.Errorf("agent row cpu_wait %v, cpu_wait_s %v; want 0.5, 2", a.CPUWait, a.CPUWaitS)
	}
	res.Agents[0].CpuWait = durationpb.New(5520 * time.Millisecond) // more threads runnable than CPUs
	r, _ = wire.ReportFromResult(res)
	want = "agent agent-1's threads waited for a CPU 1.38s per second per CPU (run-queue delay 5.52s summed over its threads, 2 CPUs; its CPUs 50 % busy)"
	if len(r.ClientBoundReasons) != 1 || r.ClientBoundReasons[0] != want {
		t.Errorf("wait over the window times the CPUs: reasons %q; want %q", r.ClientBoundReasons, want)
	}
	res.Agents[0].CpuWait = durationpb.New(800 * time.Millisecond)
	if r, _ = wire.ReportFromResult(res); r.ClientBound {
		t.Errorf("20 %% run-queue delay flagged: %q", r.ClientBoundReasons)
	}
}

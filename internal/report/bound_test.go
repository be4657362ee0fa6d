package report_test

import (
	"fmt"
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

	// Sends of the warm-up that ended in the window are not its scheduled
	// sends.
	res.Counters.Carried = 45
	if r, err = wire.ReportFromResult(res); err != nil {
		t.Fatal(err)
	}
	if want := "290 of 1000 scheduled sends (29.0 %) found every connection busy"; !r.ServerBound || !strings.HasPrefix(r.ServerBoundReasons[0], want) {
		t.Errorf("with 45 carried: server-bound %v %q, want %q", r.ServerBound, r.ServerBoundReasons, want)
	}
	text.Reset()
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "; 45 sends of the warm-up ended in the window") {
		t.Errorf("text without the carried sends:\n%s", text.String())
	}
	res.Counters.Carried = 0

	res.Counters.Backlogged = 40 // only the unsent: 260 late by the agent
	if r, err = wire.ReportFromResult(res); err != nil {
		t.Fatal(err)
	}
	if !r.ClientBound || r.ServerBound {
		t.Fatalf("late by the agent: client-bound %v %q, server-bound %v; want client-bound", r.ClientBound, r.ClientBoundReasons, r.ServerBound)
	}
	if want := "260 of 1045 scheduled sends (24.9 %) started over 5.00ms late by the agents' own scheduling (300 missed, 40 of them for a busy connection)"; !strings.Contains(strings.Join(r.ClientBoundReasons, "|"), want) {
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

// TestBacklogStall: a backlog confined to one interval that is not the
// last, nothing unsent, is a stall (of the server or of the agents: the
// report blames neither), not server-bound; spread over the intervals, in
// the last one, or with sends never sent, it is server-bound; with no
// per-interval backlog known (older agents), server-bound as before.
func TestBacklogStall(t *testing.T) {
	for _, c := range []struct {
		name     string
		points   []int64 // each interval's backlogged sends
		unsent   int64
		stall    bool
		interval string
	}{
		{"one interval", []int64{30, 0}, 0, true, "0.00s-1.00s"},
		{"one interval, a little after it", []int64{25, 5}, 0, true, "0.00s-1.00s"},
		{"spread", []int64{15, 15}, 0, false, ""},
		{"the last interval", []int64{0, 30}, 0, false, ""},
		{"some never sent", []int64{30, 0}, 3, false, ""},
		{"per-interval backlogs unknown", []int64{0, 0}, 0, false, ""},
	} {
		res := openResult(t, 40000)
		res.Counters.Missed, res.Counters.Backlogged, res.Counters.Unsent = 30+c.unsent, 30+c.unsent, c.unsent
		if len(res.Timeline) != len(c.points) {
			t.Fatalf("openResult has %d intervals, the case %d", len(res.Timeline), len(c.points))
		}
		for i, n := range c.points {
			res.Timeline[i].Backlogged = n
		}
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		if c.stall != (r.Stall != "") || c.stall == r.ServerBound || r.ClientBound {
			t.Errorf("%s: stall %q, server-bound %v, client-bound %q; want stall %v and server-bound %v", c.name, r.Stall, r.ServerBound, r.ClientBoundReasons, c.stall, !c.stall)
			continue
		}
		if !c.stall {
			continue
		}
		if want := "30 of 1005 scheduled sends (3.0 %) waited over 5ms for a busy connection, " + fmt.Sprint(c.points[0]) + " of them ending in the interval at " + c.interval + ": a stall"; !strings.HasPrefix(r.Stall, want) {
			t.Errorf("%s: stall %q, want it to start %q", c.name, r.Stall, want)
		}
		var text strings.Builder
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "\nStall: 30 of 1005") || strings.Contains(text.String(), "Server-bound") {
			t.Errorf("%s: text:\n%s", c.name, text.String())
		}
	}
}

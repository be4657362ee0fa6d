package e2e

// Process tests of losing an agent or the coordinator mid-run (README,
// "Losing an agent or the coordinator"): kill -9 and kill -STOP of real
// agent and coordinator processes, judged at the built-in target's own
// request counter.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/target"
)

// countWatch samples the target's request counter every 5 ms, so that a
// test can tell when the load started and when it last grew.
type countWatch struct {
	srv  *target.Server
	mu   sync.Mutex
	at   []time.Time
	n    []int64
	stop chan struct{}
	done chan struct{}
}

// watchCount starts sampling srv's counter until the test ends.
func watchCount(t *testing.T, srv *target.Server) *countWatch {
	w := &countWatch{srv: srv, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			w.mu.Lock()
			w.at, w.n = append(w.at, time.Now()), append(w.n, srv.Requests())
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

// span returns when the counter first rose above 0 and when it last grew,
// and the count then; ok is false before any request.
func (w *countWatch) span() (first, last time.Time, count int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, n := range w.n {
		if n > 0 && first.IsZero() {
			first = w.at[i]
		}
		if i > 0 && n != w.n[i-1] {
			last, count = w.at[i], n
		}
	}
	return first, last, count, !first.IsZero()
}

// lossReport is the part of coordctl's JSON report these tests read.
type lossReport struct {
	DurationS         float64 `json:"duration_s"`
	PlanDurationS     float64 `json:"plan_duration_s"`
	StoppedEarly      bool    `json:"stopped_early"`
	Partial           bool    `json:"partial"`
	Aborted           bool    `json:"aborted"`
	OnAgentLoss       string  `json:"on_agent_loss"`
	CoordinatorStallS float64 `json:"coordinator_stall_s"`
	CoordinatorLost   string  `json:"coordinator_lost"`
	Requests          int64   `json:"requests"`
	InFlight          int64   `json:"in_flight"`
	RPS               float64 `json:"rps"`
	LostAgents        []struct {
		Name        string  `json:"name"`
		LostAtS     float64 `json:"lost_at_s"`
		RanS        float64 `json:"ran_s"`
		Error       string  `json:"error"`
		Connections int64   `json:"connections"`
	} `json:"lost_agents"`
	Timeline []struct {
		Index     int     `json:"index"`
		DurationS float64 `json:"duration_s"`
		Requests  int64   `json:"requests"`
		Agents    int     `json:"agents"`
		Partial   bool    `json:"partial"`
		Target    float64 `json:"target_connections"`
	} `json:"timeline"`
	Agents []struct {
		Name     string `json:"name"`
		Requests int64  `json:"requests"`
		Lost     bool   `json:"lost"`
		Error    string `json:"error"`
	} `json:"agents"`
}

func readLossReport(t *testing.T, file string) *lossReport {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("--json file: %v", err)
	}
	var rep lossReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("--json file: %v\n%s", err, b)
	}
	return &rep
}

// progressRE matches coordctl's progress line of one merged interval.
var progressRE = regexp.MustCompile(`(?m)^  \[\s*(\d+)\]\s+(\d+) req/s`)

// progressLines returns the requests of each whole 1 s interval coordctl
// printed (interval index → requests; at 1 s, req/s is the count).
func progressLines(stderr string) map[int]int64 {
	out := map[int]int64{}
	for _, m := range progressRE.FindAllStringSubmatch(stderr, -1) {
		k, _ := strconv.Atoi(m[1])
		n, _ := strconv.ParseInt(m[2], 10, 64)
		out[k-1] = n
	}
	return out
}

// startLossRun starts coordctl run on c against srv with --json and extra
// flags, and waits until coordctl has printed two merged intervals.
func startLossRun(t *testing.T, c *procCluster, srv *target.Server, caFile, jsonFile string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--coordinator", c.grpcAddr, "run", "--cacert", caFile, "--json", jsonFile}, extra...)
	args = append(args, srv.URL())
	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"), args...)
	if err := waitUntil(procReadyTimeout, run, func(context.Context) error {
		if !strings.Contains(run.Stderr(), "[  2]") {
			return fmt.Errorf("coordctl has not printed two intervals; stderr %q", run.Stderr())
		}
		return nil
	}); err != nil {
		t.Fatalf("run not under way: %v\n%s", err, run.describe())
	}
	return run
}

// startTargetCA starts the built-in target and writes its CA for
// --cacert.
func startTargetCA(t *testing.T) (*target.Server, string) {
	t.Helper()
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

// waitExit waits up to d for coordctl run to exit, logs its output, and
// checks its exit status is want.
func waitExit(t *testing.T, run *proc, d time.Duration, want int) (stdout, stderr string) {
	t.Helper()
	code, ok := run.Wait(d)
	if !ok {
		t.Fatalf("coordctl still running after %v\n%s", d, run.describe())
	}
	stdout, stderr = run.Stdout(), run.Stderr()
	t.Logf("coordctl exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	if code != want {
		t.Errorf("coordctl exit status %d, want %d", code, want)
	}
	return stdout, stderr
}

// signal sends sig to p.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

// checkKeptBeforeLoss checks that every whole interval coordctl printed
// before the loss (all agents merged) is in the report with the same
// count: nothing an agent sent before it was lost is dropped.
func checkKeptBeforeLoss(t *testing.T, rep *lossReport, stderr string, agents int) {
	t.Helper()
	printed := progressLines(stderr)
	whole := 0
	for _, pt := range rep.Timeline {
		if pt.Agents != agents || pt.DurationS != 1 {
			continue
		}
		whole++
		if n, ok := printed[pt.Index]; !ok || n != pt.Requests {
			t.Errorf("interval %d: report has %d requests from %d agents, coordctl printed %d (%v)", pt.Index, pt.Requests, pt.Agents, n, ok)
		}
	}
	if whole < 2 {
		t.Errorf("%d whole intervals of %d agents in the report, want at least the 2 before the loss", whole, agents)
	}
}

// TestProcAgentKilledAbort kills -9 one of three agent processes mid-run
// under the default policy (abort): the other two must stop within 1 s at
// the target's counter (judged generously: it no longer grows from kill +
// 1.5 s), and coordctl must report the window up to the loss, name the
// killed agent and how, keep every interval received before it, and exit 4.
func TestProcAgentKilledAbort(t *testing.T) {
	srv, caFile := startTargetCA(t)
	c := startProcCluster(t, 3)
	watch := watchCount(t, srv)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	run := startLossRun(t, c, srv, caFile, jsonFile, "-c", "6", "-d", "20s")

	victim := c.agents[1]
	victim.Kill()
	killedAt := time.Now()
	time.Sleep(time.Until(killedAt.Add(1500 * time.Millisecond)))
	at15 := srv.Requests()
	time.Sleep(time.Until(killedAt.Add(2500 * time.Millisecond)))
	at25 := srv.Requests()
	first, last, _, _ := watch.span()
	t.Logf("target: %d requests at kill+1.5s, %d at kill+2.5s; load from %v before the kill to %v after it",
		at15, at25, killedAt.Sub(first).Round(time.Millisecond), last.Sub(killedAt).Round(time.Millisecond))
	if at25 != at15 {
		t.Errorf("the other agents still send load after the loss: %d requests at kill+1.5s, %d at kill+2.5s", at15, at25)
	}

	stdout, stderr := waitExit(t, run, 10*time.Second, 4)
	if !strings.Contains(stderr, "coordctl: lost agent proc-agent-2 after ") || !strings.Contains(stderr, "stopping the other agents (--on-agent-loss abort)") {
		t.Errorf("stderr does not report the loss as it happened")
	}
	if strings.Contains(stderr+stdout, "lost the coordinator") {
		t.Errorf("a dead agent is blamed on the coordinator")
	}
	if !strings.Contains(stdout, "  Lost agent proc-agent-2 after ") || !strings.Contains(stdout, "  Aborted (on_agent_loss abort)") {
		t.Errorf("text report does not name the loss and the abort")
	}
	rep := readLossReport(t, jsonFile)
	if !rep.Partial || !rep.Aborted || rep.StoppedEarly || rep.OnAgentLoss != "abort" {
		t.Errorf("partial %v, aborted %v, stopped early %v, policy %q; want true, true, false, abort", rep.Partial, rep.Aborted, rep.StoppedEarly, rep.OnAgentLoss)
	}
	if len(rep.LostAgents) != 1 || rep.LostAgents[0].Name != "proc-agent-2" || !strings.HasPrefix(rep.LostAgents[0].Error, "agent proc-agent-2: stream ended (") || rep.LostAgents[0].Connections != 2 {
		t.Fatalf("lost agents %+v, want proc-agent-2 (2 connections), its stream ended", rep.LostAgents)
	}
	// The window is the load up to the loss: the target saw load for
	// about as long (the killed agent's last, unsent, interval aside).
	ran := last.Sub(first).Seconds()
	if rep.DurationS > ran+0.5 || rep.DurationS < ran-1.5 || rep.DurationS >= rep.PlanDurationS {
		t.Errorf("report window %.2fs; the target saw load for %.2fs (planned %vs)", rep.DurationS, ran, rep.PlanDurationS)
	}
	if got := srv.Requests(); rep.Requests+rep.InFlight > got {
		t.Errorf("report has %d requests + %d in flight, more than the target's %d", rep.Requests, rep.InFlight, got)
	}
	checkKeptBeforeLoss(t, rep, stderr, 3)
	for _, a := range rep.Agents {
		if a.Lost != (a.Name == "proc-agent-2") || a.Requests == 0 {
			t.Errorf("agent row %+v", a)
		}
	}
	// The survivors ended their shares, stopped by the abort. (Their idle
	// state is not awaited: with a member just killed, memberlist may
	// carry a meta update to the coordinator only at its next push-pull.)
	for _, a := range []*proc{c.agents[0], c.agents[2]} {
		waitLog(t, a, `msg="share done"`, "stopped_early=true")
	}
}

// TestProcAgentKilledContinue kills -9 one of three agent processes
// mid-run with --on-agent-loss continue: the other two run to the planned
// end, and the report keeps the planned window, names the loss, marks the
// intervals without the lost agent partial with the remaining target (4
// of 6 connections), keeps every interval received before the loss, and
// coordctl exits 4.
func TestProcAgentKilledContinue(t *testing.T) {
	srv, caFile := startTargetCA(t)
	c := startProcCluster(t, 3)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	run := startLossRun(t, c, srv, caFile, jsonFile, "-c", "6", "-d", "6s", "--on-agent-loss", "continue")
	c.agents[2].Kill()
	killedAt := time.Now()
	time.Sleep(time.Until(killedAt.Add(1500 * time.Millisecond)))
	at15 := srv.Requests()
	time.Sleep(time.Until(killedAt.Add(2000 * time.Millisecond)))
	if at2 := srv.Requests(); at2 == at15 && !run.Exited() {
		t.Errorf("no load from kill+1.5s to kill+2s with continue: the other agents stopped")
	}
	_, stderr := waitExit(t, run, 15*time.Second, 4)
	if !strings.Contains(stderr, "coordctl: lost agent proc-agent-3 after ") || !strings.Contains(stderr, "the other agents run on (--on-agent-loss continue)") {
		t.Errorf("stderr does not report the loss and the policy")
	}
	if !strings.Contains(stderr, "(partial: 2 agents)") {
		t.Errorf("progress lines stopped, or were not marked partial, after the loss")
	}
	rep := readLossReport(t, jsonFile)
	if !rep.Partial || rep.Aborted || rep.DurationS != 6 || len(rep.LostAgents) != 1 || rep.LostAgents[0].Name != "proc-agent-3" {
		t.Errorf("partial %v, aborted %v, window %vs, lost %+v; want partial, not aborted, 6s, proc-agent-3", rep.Partial, rep.Aborted, rep.DurationS, rep.LostAgents)
	}
	partial := 0
	for _, pt := range rep.Timeline {
		if pt.Partial {
			partial++
			if pt.Agents != 2 || pt.Target != 4 {
				t.Errorf("partial interval %d: %d agents, target %v connections; want 2 and 4", pt.Index, pt.Agents, pt.Target)
			}
		}
	}
	if partial == 0 {
		t.Errorf("no interval marked partial after the loss")
	}
	checkKeptBeforeLoss(t, rep, stderr, 3)
	if got := srv.Requests(); rep.Requests+rep.InFlight > got {
		t.Errorf("report has %d requests + %d in flight, more than the target's %d", rep.Requests, rep.InFlight, got)
	}
}

// TestProcAgentFrozenIsLost freezes one of two agent processes (kill
// -STOP) mid-run with continue: the coordinator must give it up as silent
// within the documented bound (its next interval 2 intervals + 2 s
// overdue: at most 5 s after the freeze at 1 s intervals, judged with 2 s
// of slack), name it and how, and the run must go on with the other agent.
func TestProcAgentFrozenIsLost(t *testing.T) {
	srv, caFile := startTargetCA(t)
	c := startProcCluster(t, 2)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	run := startLossRun(t, c, srv, caFile, jsonFile, "-c", "4", "-d", "10s", "--on-agent-loss", "continue")
	frozen := c.agents[0]
	frozen.signal(syscall.SIGSTOP)
	frozenAt := time.Now()
	t.Cleanup(func() { _ = frozen.cmd.Process.Signal(syscall.SIGCONT) }) // before its own cleanup's SIGTERM
	if err := waitUntil(10*time.Second, run, func(context.Context) error {
		if !strings.Contains(run.Stderr(), "coordctl: lost agent proc-agent-1 after ") {
			return fmt.Errorf("no loss reported")
		}
		return nil
	}); err != nil {
		t.Fatalf("the frozen agent was not given up: %v\n%s", err, run.describe())
	}
	detected := time.Since(frozenAt)
	t.Logf("frozen agent given up %v after SIGSTOP", detected.Round(time.Millisecond))
	if detected > 7*time.Second {
		t.Errorf("the frozen agent was given up %v after it froze; the bound is 5s (+2s slack)", detected)
	}
	frozen.signal(syscall.SIGCONT)
	_, stderr := waitExit(t, run, 15*time.Second, 4)
	rep := readLossReport(t, jsonFile)
	if !rep.Partial || len(rep.LostAgents) != 1 || !strings.HasPrefix(rep.LostAgents[0].Error, "agent proc-agent-1: silent for ") || rep.DurationS != 10 {
		t.Errorf("partial %v, window %v, lost %+v; want proc-agent-1 silent, the other agent's 10 s window", rep.Partial, rep.DurationS, rep.LostAgents)
	}
	checkKeptBeforeLoss(t, rep, stderr, 2)
	// The woken agent stopped its load: the coordinator had ended its
	// stream.
	waitLog(t, frozen, `msg="the coordinator's run stream ended mid-share: the load stopped at once"`)
}

// TestProcCoordinatorFrozen freezes the coordinator process for 3 s (kill
// -STOP, then -CONT) in a 20 s run: its agents stop their load on their
// own (2 to 3 s without it), and the report must say so (partial, the
// stall, each agent's stream end blamed on it), exit 4, and give a window
// and RPS that match what the target's counter saw over the time the load
// ran. When the agents' keepalive happened to survive the 3 s (their
// streams did not end), nothing was lost: that attempt must be whole, and
// the freeze is tried again (at most 3 attempts).
func TestProcCoordinatorFrozen(t *testing.T) {
	for attempt := 1; attempt <= 3; attempt++ {
		if coordinatorFrozen(t) {
			return
		}
		t.Logf("attempt %d: the agents' streams survived the 3 s freeze; trying again", attempt)
	}
	t.Errorf("the agents never stopped during a 3 s freeze of their coordinator")
}

// coordinatorFrozen runs one attempt of TestProcCoordinatorFrozen; it
// reports false when the agents kept their streams.
func coordinatorFrozen(t *testing.T) bool {
	srv, caFile := startTargetCA(t)
	c := startProcCluster(t, 2)
	watch := watchCount(t, srv)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	run := startLossRun(t, c, srv, caFile, jsonFile, "-c", "4", "-d", "20s")
	c.coord.signal(syscall.SIGSTOP)
	frozenAt := time.Now()
	t.Cleanup(func() { _ = c.coord.cmd.Process.Signal(syscall.SIGCONT) })
	time.Sleep(3 * time.Second)
	c.coord.signal(syscall.SIGCONT)
	t.Logf("coordinator frozen for %v", time.Since(frozenAt).Round(time.Millisecond))
	code, ok := run.Wait(30 * time.Second)
	if !ok {
		t.Fatalf("coordctl still running\n%s", run.describe())
	}
	stdout, stderr := run.Stdout(), run.Stderr()
	t.Logf("coordctl exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	rep := readLossReport(t, jsonFile)
	first, last, count, _ := watch.span()
	ran := last.Sub(first).Seconds()
	if len(rep.LostAgents) == 0 {
		if code != 0 || rep.Partial || rep.DurationS != 20 {
			t.Errorf("nothing lost, yet exit %d, partial %v, window %v", code, rep.Partial, rep.DurationS)
		}
		return false
	}
	t.Logf("target: %d requests over %.2fs (%.0f/s), the last %v after the freeze; report: %d requests over %.2fs (%.0f/s)",
		count, ran, float64(count)/ran, last.Sub(frozenAt).Round(time.Millisecond), rep.Requests, rep.DurationS, rep.RPS)
	if code != 4 {
		t.Errorf("exit status %d, want 4 (not whole)", code)
	}
	if !rep.Partial || rep.CoordinatorStallS < 2.5 || rep.DurationS >= rep.PlanDurationS {
		t.Errorf("partial %v, coordinator stall %vs, window %vs of %vs; want partial, a stall of about 3 s, a window shorter than planned",
			rep.Partial, rep.CoordinatorStallS, rep.DurationS, rep.PlanDurationS)
	}
	for _, l := range rep.LostAgents {
		if !strings.Contains(l.Error, "after the coordinator stalled for") {
			t.Errorf("lost %s: %q does not blame the coordinator's stall", l.Name, l.Error)
		}
	}
	// The window ends with the last interval received: at most one
	// interval (the one unsent when each agent stopped) before the load
	// the target saw, never after it; the rates then agree.
	if rep.DurationS > ran+0.3 || rep.DurationS < ran-1.3 {
		t.Errorf("report window %.2fs, the target saw load for %.2fs", rep.DurationS, ran)
	}
	if targetRPS := float64(count) / ran; rep.RPS < 0.75*targetRPS || rep.RPS > 1.25*targetRPS {
		t.Errorf("report %.0f requests/s, the target saw %.0f/s over the time the load ran", rep.RPS, targetRPS)
	}
	if rep.Requests+rep.InFlight > count {
		t.Errorf("report has %d requests + %d in flight, more than the target's %d", rep.Requests, rep.InFlight, count)
	}
	return true
}

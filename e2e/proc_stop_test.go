package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcCtrlCStopsRunEarly sends SIGINT to a real coordctl process 1.5 s
// into a 10 s run on a coordinator process and two agent processes: coordctl
// must say it is stopping, print the report of a window of about 1.5 s (text
// and --json, both saying it was stopped early, with requests counted and
// RPS over the shortened window), exit with status 3 as documented, and
// leave the agents idle and able to take the next run.
func TestProcCtrlCStopsRunEarly(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, 2)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"),
		"--coordinator", c.grpcAddr, "run", "-c", "4", "-d", "10s", "--cacert", caFile, "--json", jsonFile, srv.URL())

	// The window starts with the first request the target sees.
	deadline := time.Now().Add(procReadyTimeout)
	for srv.Requests() == 0 {
		if run.Exited() || time.Now().After(deadline) {
			t.Fatalf("the run did not start within %v\n%s", procReadyTimeout, run.describe())
		}
		time.Sleep(2 * time.Millisecond)
	}
	firstSeen := time.Now()
	time.Sleep(time.Until(firstSeen.Add(1500 * time.Millisecond)))
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v", err)
	}
	signalled := time.Now()
	code, ok := run.Wait(10 * time.Second)
	if !ok {
		t.Fatalf("coordctl still running 10 s after SIGINT\n%s", run.describe())
	}
	stdout, stderr := run.Stdout(), run.Stderr()
	t.Logf("SIGINT %v after the first request; coordctl exited %d after %v\nstdout:\n%s\nstderr:\n%s",
		signalled.Sub(firstSeen).Round(time.Millisecond), code, time.Since(signalled).Round(time.Millisecond), stdout, stderr)

	if code != 3 {
		t.Errorf("exit status %d, want 3 (stopped early)", code)
	}
	if !strings.Contains(stderr, "coordctl: stopping the run early (Ctrl-C again to abandon it)\n") {
		t.Errorf("stderr lacks the stopping message")
	}
	// Text report: the planned window in the header, the stopped-early
	// line, and the shortened window's figures.
	if !strings.HasPrefix(stdout, "Running 10s test @ "+srv.URL()) {
		t.Errorf("text report header is not the planned 10 s test")
	}
	m := regexp.MustCompile(`(?m)^  Stopped early by the user after ([0-9.]+)s of 10s$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("text report lacks the stopped-early line")
	}
	textWindow, _ := strconv.ParseFloat(m[1], 64)
	rm := regexp.MustCompile(`(?m)^  (\d+) requests in ([0-9.]+)s, `).FindStringSubmatch(stdout)
	if rm == nil || rm[2] != m[1] || rm[1] == "0" {
		t.Errorf("text report's request line %q does not give requests over the %ss window", rm, m[1])
	}
	if textWindow < 1.3 || textWindow > 2.5 {
		t.Errorf("text report's window %.2fs, want about 1.5 s", textWindow)
	}

	// JSON report.
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		StoppedEarly  bool    `json:"stopped_early"`
		DurationS     float64 `json:"duration_s"`
		PlanDurationS float64 `json:"plan_duration_s"`
		Issued        int64   `json:"issued"`
		Requests      int64   `json:"requests"`
		InFlight      int64   `json:"in_flight"`
		RPS           float64 `json:"rps"`
		Errors        map[string]int64
		Agents        []struct {
			Name     string `json:"name"`
			Requests int64  `json:"requests"`
			Error    string `json:"error"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("--json file: %v\n%s", err, b)
	}
	if !rep.StoppedEarly || rep.PlanDurationS != 10 {
		t.Errorf("JSON stopped_early %v, plan_duration_s %v; want true and 10", rep.StoppedEarly, rep.PlanDurationS)
	}
	if rep.DurationS < 1.3 || rep.DurationS > 2.5 {
		t.Errorf("JSON duration_s %.3f, want about 1.5", rep.DurationS)
	}
	if rep.Requests == 0 || rep.RPS != float64(rep.Requests)/rep.DurationS {
		t.Errorf("JSON requests %d, rps %v: want requests > 0 over the shortened window", rep.Requests, rep.RPS)
	}
	var errs int64
	for _, n := range rep.Errors {
		errs += n
	}
	if rep.Issued != rep.Requests+errs+rep.InFlight {
		t.Errorf("issued %d != requests %d + errors %d + in flight %d", rep.Issued, rep.Requests, errs, rep.InFlight)
	}
	if got := srv.Requests(); got != rep.Requests+rep.InFlight {
		t.Errorf("the target counted %d requests; the report %d + %d in flight", got, rep.Requests, rep.InFlight)
	}
	if len(rep.Agents) != 2 {
		t.Errorf("%d agent rows, want 2", len(rep.Agents))
	}
	for _, a := range rep.Agents {
		if a.Requests == 0 || a.Error != "" {
			t.Errorf("agent row %+v", a)
		}
	}

	// The agents are idle again and take the next run.
	c.waitIdle(t)
	stdout2, stderr2, code2 := runCoordctl(t, 20*time.Second, procEnv(),
		"--coordinator", c.grpcAddr, "run", "-c", "2", "-d", "1s", "--cacert", caFile, srv.URL())
	if code2 != 0 || !strings.Contains(stdout2, "Requests/sec:") || strings.Contains(stdout2, "Stopped early") {
		t.Errorf("next run: exit %d\nstdout:\n%s\nstderr:\n%s", code2, stdout2, stderr2)
	}
}

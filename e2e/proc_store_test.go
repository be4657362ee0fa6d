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
)

// storedRun is one row of coordctl runs --json.
type storedRun struct {
	RunID            string   `json:"run_id"`
	State            string   `json:"state"`
	Tags             []string `json:"tags"`
	Note             string   `json:"note"`
	Requests         int64    `json:"requests"`
	Intervals        int      `json:"intervals"`
	Thresholds       []string `json:"thresholds"`
	ThresholdsFailed []string `json:"thresholds_failed"`
	Error            string   `json:"error"`
}

// listRuns runs coordctl runs --json with args and decodes its list.
func listRuns(t *testing.T, args ...string) []storedRun {
	t.Helper()
	stdout, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), append([]string{"runs", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("coordctl runs %v: exit %d\n%s", args, code, stderr)
	}
	var runs []storedRun
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
		t.Fatalf("coordctl runs --json: %v\n%s", err, stdout)
	}
	return runs
}

// TestProcStoreSurvivesCoordinatorKill kills -9 the coordinator in the
// middle of a run: its run store opens cleanly afterwards, both directly
// (coordctl --data-dir) and by a coordinator restarted on it, and lists the
// run as not finished with the intervals merged before the kill, which
// coordctl report renders; export, import and rm carry it over.
func TestProcStoreSurvivesCoordinatorKill(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, 1)
	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"),
		"--coordinator", c.grpcAddr, "run", "-c", "2", "-d", "60s", "--cacert", caFile, "--tag", "killed", "--note", "kill -9 mid-run", srv.URL())
	// Three intervals merged (and printed) before the kill.
	if err := waitUntil(procReadyTimeout, run, func(context.Context) error {
		if !strings.Contains(run.Stderr(), "[  3]") {
			return fmt.Errorf("coordctl printed %q", run.Stderr())
		}
		return nil
	}); err != nil {
		t.Fatalf("run not under way: %v\n%s\n%s", err, run.describe(), c.coord.describe())
	}
	c.coord.Kill()
	if _, ok := c.coord.Wait(5 * time.Second); !ok {
		t.Fatal("coordinator still running 5s after SIGKILL")
	}
	if code, ok := run.Wait(15 * time.Second); !ok || code != 5 {
		t.Errorf("coordctl run: exit %d (exited %v), want 5 (lost the coordinator)", code, ok)
	}

	// The store, opened directly: the run is there, not finished, with
	// the intervals merged before the kill (at least the two before the
	// one printed last: each is written as it is merged, off the run loop).
	runs := listRuns(t, "--data-dir", c.dataDir)
	if len(runs) != 1 {
		t.Fatalf("coordctl runs --data-dir lists %d runs, want 1: %+v", len(runs), runs)
	}
	r := runs[0]
	t.Logf("stored after the kill: %+v", r)
	if r.State != "not finished" || r.Intervals < 2 || r.Requests == 0 || len(r.Tags) != 1 || r.Tags[0] != "killed" ||
		r.Note != "kill -9 mid-run" || !strings.Contains(r.Error, "the coordinator stopped during the run") {
		t.Errorf("stored run %+v: want not finished with >= 2 intervals, its requests, tag killed, the note and why", r)
	}
	stdout, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "report", "--data-dir", c.dataDir, r.RunID)
	if code != 0 || !strings.Contains(stdout, "Partial: not finished: the coordinator stopped during the run") ||
		!strings.Contains(stdout, "Requests/sec:") || !strings.Contains(stdout, "Run ID: "+r.RunID) {
		t.Errorf("coordctl report of the killed run: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A coordinator restarted on the store opens it and serves the run.
	c2 := startProcCoordinatorIn(t, nil, c.dataDir)
	viaCoord := listRuns(t, "--coordinator", c2.grpcAddr)
	if len(viaCoord) != 1 || viaCoord[0].RunID != r.RunID || viaCoord[0].State != "not finished" || viaCoord[0].Intervals != r.Intervals {
		t.Errorf("the restarted coordinator lists %+v, want the run as stored (%+v)", viaCoord, r)
	}

	// export from the coordinator, import into another store, rm.
	phx := filepath.Join(t.TempDir(), "run.phx")
	if _, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "--coordinator", c2.grpcAddr, "export", "-o", phx, r.RunID); code != 0 {
		t.Fatalf("coordctl export: exit %d\n%s", code, stderr)
	}
	other := t.TempDir()
	if out, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "import", "--data-dir", other, phx); code != 0 || !strings.Contains(out, "imported run "+r.RunID) {
		t.Fatalf("coordctl import: exit %d\n%s%s", code, out, stderr)
	}
	imported := listRuns(t, "--data-dir", other)
	if len(imported) != 1 || imported[0].RunID != r.RunID || imported[0].Intervals != r.Intervals || imported[0].Requests != r.Requests {
		t.Errorf("imported %+v, want %+v", imported, r)
	}
	if _, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "import", "--data-dir", other, phx); code == 0 || !strings.Contains(stderr, "already in the store") {
		t.Errorf("importing the run twice: exit %d, stderr %q: want an error saying it is already stored", code, stderr)
	}
	if _, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "--coordinator", c2.grpcAddr, "rm", r.RunID); code != 0 {
		t.Fatalf("coordctl rm: exit %d\n%s", code, stderr)
	}
	if left := listRuns(t, "--coordinator", c2.grpcAddr); len(left) != 0 {
		t.Errorf("after rm the coordinator lists %+v", left)
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "runs.db")); err != nil {
		t.Error(err)
	}
}

// thresholdReport is the part of the JSON report the threshold tests read.
type thresholdReport struct {
	DurationS  float64 `json:"duration_s"`
	Thresholds []struct {
		Threshold string   `json:"threshold"`
		Value     *float64 `json:"value"`
		Unit      string   `json:"unit"`
		Pass      bool     `json:"pass"`
	} `json:"thresholds"`
	AbortedByThreshold string  `json:"aborted_by_threshold"`
	AbortedAtS         float64 `json:"aborted_at_s"`
	StoppedEarly       bool    `json:"stopped_early"`
}

func readThresholdReport(t *testing.T, name string) thresholdReport {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var rep thresholdReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rep
}

// TestProcThresholds runs coordctl run with a threshold no run can meet
// (p99 under 1 µs) and one it meets: it exits 99, the text and JSON list
// both with their values and verdicts, and the store keeps them. With
// --abort-on-fail the run ends after the grace period plus the abort
// window, far before its planned 60 s, and the report says which
// threshold ended it and covers only what ran.
func TestProcThresholds(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, 1)
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	stdout, stderr, code := runCoordctl(t, 60*time.Second, procEnv(), "--coordinator", c.grpcAddr, "run", "-c", "2", "-d", "2s", "--cacert", caFile,
		"--threshold", "p99<1us", "--threshold", "errors<1%", "--json", jsonFile, srv.URL())
	if code != 99 || !strings.Contains(stderr, "1 of 2 thresholds failed: p99<1us") {
		t.Errorf("coordctl run with a failing threshold: exit %d, want 99 naming it\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "Thresholds: 1 of 2 passed") || !strings.Contains(stdout, "FAIL p99<1us") || !strings.Contains(stdout, "pass errors<1%") {
		t.Errorf("text report lacks the thresholds:\n%s", stdout)
	}
	rep := readThresholdReport(t, jsonFile)
	if len(rep.Thresholds) != 2 || rep.Thresholds[0].Pass || rep.Thresholds[0].Value == nil || *rep.Thresholds[0].Value < 1 || rep.Thresholds[0].Unit != "us" ||
		!rep.Thresholds[1].Pass || rep.Thresholds[1].Value == nil || *rep.Thresholds[1].Value != 0 || rep.Thresholds[1].Unit != "ratio" {
		t.Errorf("JSON thresholds %+v: want p99<1us failed with its value in us, errors<1%% passed at 0", rep.Thresholds)
	}
	if runs := listRuns(t, "--coordinator", c.grpcAddr); len(runs) != 1 || runs[0].State != "finished" ||
		len(runs[0].ThresholdsFailed) != 1 || runs[0].ThresholdsFailed[0] != "p99<1us" {
		t.Errorf("stored %+v: want one finished run with p99<1us failed", runs)
	}

	// A passing threshold exits 0.
	if _, stderr, code := runCoordctl(t, 60*time.Second, procEnv(), "--coordinator", c.grpcAddr, "run", "-c", "2", "-d", "1s", "--cacert", caFile,
		"--threshold", "p99<30s", srv.URL()); code != 0 {
		t.Errorf("coordctl run with a passing threshold: exit %d\n%s", code, stderr)
	}

	// --abort-on-fail: 1 s of grace, then 2 s of failing intervals.
	began := time.Now()
	_, stderr, code = runCoordctl(t, 60*time.Second, procEnv(), "--coordinator", c.grpcAddr, "run", "-c", "2", "-d", "60s", "--cacert", caFile,
		"--threshold", "errors<1%", "--threshold", "p99<1us", "--abort-on-fail", "--abort-delay", "1s", "--abort-window", "2s", "--json", jsonFile, srv.URL())
	took := time.Since(began)
	if code != 99 || !strings.Contains(stderr, "aborted by p99<1us") {
		t.Errorf("coordctl run --abort-on-fail: exit %d, want 99 naming the threshold\n%s", code, stderr)
	}
	rep = readThresholdReport(t, jsonFile)
	t.Logf("aborted after %v: window %.2fs, aborted at %.2fs", took.Round(time.Millisecond), rep.DurationS, rep.AbortedAtS)
	if rep.AbortedByThreshold != "p99<1us" || rep.AbortedAtS < 3 || rep.DurationS < rep.AbortedAtS || rep.DurationS > 30 || rep.StoppedEarly || took > 45*time.Second {
		t.Errorf("abort report %+v after %v: want aborted by p99<1us at >= 3s (1s grace + 2s window), a window from then on and far below 60s", rep, took)
	}
}

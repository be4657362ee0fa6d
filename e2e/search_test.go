package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// searchResult runs coordctl search with args against c and returns its
// JSON result, its stdout and its exit status.
func searchResult(t *testing.T, c *procCluster, args ...string) (*report.Search, string, int) {
	t.Helper()
	jsonFile := filepath.Join(t.TempDir(), "search.json")
	argv := append([]string{"--coordinator", c.grpcAddr, "search", "--json", jsonFile}, args...)
	run := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), argv...)
	code, ok := run.Wait(5 * time.Minute)
	if !ok {
		t.Fatalf("coordctl search did not end\n%s", run.describe())
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatalf("search JSON: %v (exit %d)\n%s", err, code, run.describe())
	}
	var s report.Search
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s, run.describe(), code
}

// TestSearchModelledKnee: a search with --slo 'p99<3*D' over the modelled
// server of 4 workers of D = 5 ms (capacity 800 requests/s) finds the
// knee within 5 % of 800 with a confidence interval that reaches the band
// [760, 800] (a few per cent below capacity the queue's p99 may already
// cross 15 ms with the sends' jitter, so the SLO's knee lies in it), its
// steps stored as runs of the search that coordctl report re-renders;
// or, when this machine makes the agent client-bound, says the search
// was inconclusive naming it.
func TestSearchModelledKnee(t *testing.T) {
	const capacity = 800.0
	srv, ca := targettest.StartConfig(t, target.Config{Workers: 4, ServiceTime: 5 * time.Millisecond})
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	startBoundAgents(t, c, []string{"search-agent"})
	s, out, code := searchResult(t, c, "--slo", "p99<15ms", "--rate-range", "200..3200", "-c", "8", "--max-connections", "16",
		"-d", "2s", "--warmup", "1s", "--timeout", "2s", "--max-steps", "20", "--cacert", caFile, srv.URL())
	t.Logf("outcome %s: knee %.1f (%.1f..%.1f), %s; %d steps", s.Outcome, s.Knee, s.KneeLo, s.KneeHi, s.Message, len(s.Steps))
	for _, st := range s.Steps {
		t.Logf("step %d: %.1f r%d: achieved %.1f p99 %dus %s %s", st.Index, st.Target, st.Repeat, st.AchievedRPS, st.P99Us, st.Verdict, st.Why)
	}
	switch s.Outcome {
	case "found":
		if code != 0 {
			t.Errorf("exit %d, want 0\n%s", code, out)
		}
		if s.Knee < 0.95*capacity || s.Knee > 1.05*capacity || s.KneeLo > capacity || s.KneeHi < 0.95*capacity {
			t.Errorf("knee %.1f (CI %.1f..%.1f), want within 5 %% of %v with the CI reaching %v..%v", s.Knee, s.KneeLo, s.KneeHi, capacity, 0.95*capacity, capacity)
		}
	case "inconclusive":
		if code != 6 || len(s.SaturatedAgents) == 0 && !strings.Contains(s.Message, "short") {
			t.Errorf("inconclusive (exit %d) naming %v: %s", code, s.SaturatedAgents, s.Message)
		}
		last := s.Steps[len(s.Steps)-1]
		if last.Verdict != "inconclusive" {
			t.Errorf("last step %+v: want the inconclusive one", last)
		}
	default:
		t.Fatalf("outcome %q (exit %d): %s\n%s", s.Outcome, code, s.Message, out)
	}
	for _, st := range s.Steps {
		if st.Verdict == "pass" && (st.AchievedRPS < 0.99*st.Target || st.P99Us >= 15000) {
			t.Errorf("step %+v passed short of its target or over the SLO", st)
		}
	}
	// The steps are in the store, as runs of the search, and re-render.
	runs := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), "--coordinator", c.grpcAddr, "runs", "--search", s.SearchID, "--json")
	if code, ok := runs.Wait(30 * time.Second); !ok || code != 0 {
		t.Fatalf("coordctl runs: exit %d\n%s", code, runs.describe())
	}
	for _, st := range s.Steps {
		if !strings.Contains(runs.Stdout(), st.RunID) {
			t.Errorf("run %s of step %d not listed under search %s", st.RunID, st.Index, s.SearchID)
		}
	}
	rep := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), "--coordinator", c.grpcAddr, "report", s.Steps[0].RunID)
	if code, ok := rep.Wait(30 * time.Second); !ok || code != 0 || !strings.Contains(rep.Stdout(), "Requests/sec:") {
		t.Errorf("coordctl report %s: exit %d\n%s", s.Steps[0].RunID, code, rep.describe())
	}
}

// TestSearchNginx: a search with a p99 SLO against real NGINX ends either
// with a knee that holds itself up (every repeat at the passing step held
// the SLO, and a run at 1.2 × the knee breaks it: coordctl run with the
// SLO as --threshold exits 99), or with "inconclusive: client-bound"
// naming the agent when this machine is too small. Either way the steps
// are stored as runs of the search.
func TestSearchNginx(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{})
	c := startProcCoordinator(t)
	startBoundAgents(t, c, []string{"nginx-agent"})
	const slo = "p99<20ms"
	s, out, code := searchResult(t, c, "--slo", slo, "--rate-range", "500..64000", "-c", "16", "--max-connections", "64",
		"-d", "2s", "--warmup", "1s", "--timeout", "2s", "--max-steps", "14", "--cacert", srv.CAFile(), srv.URL())
	t.Logf("outcome %s: knee %.1f (%.1f..%.1f), %s; %d steps", s.Outcome, s.Knee, s.KneeLo, s.KneeHi, s.Message, len(s.Steps))
	switch s.Outcome {
	case "found":
		for _, st := range s.Steps {
			if st.Target == s.Passing && st.Verdict != "pass" {
				t.Errorf("a repeat at the passing step %v: %+v", s.Passing, st)
			}
		}
		jsonFile := filepath.Join(t.TempDir(), "above.json")
		above := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), "--coordinator", c.grpcAddr, "run", "--quiet",
			"-R", strconv.Itoa(int(1.2*s.Knee)), "-c", "16", "--max-connections", "64", "-d", "2s", "--warmup", "1s", "--timeout", "2s",
			"--threshold", slo, "--cacert", srv.CAFile(), "--json", jsonFile, srv.URL())
		if code, ok := above.Wait(60 * time.Second); !ok || code != 99 {
			t.Errorf("run at 1.2 × the knee %.0f: exit %d, want 99 (the SLO broken)\n%s", s.Knee, code, above.describe())
		}
	case "inconclusive":
		if code != 6 || !strings.Contains(s.Message, "client-bound") || !slices.Contains(s.SaturatedAgents, "nginx-agent") {
			t.Errorf("inconclusive (exit %d), saturated %v: want client-bound naming nginx-agent: %s", code, s.SaturatedAgents, s.Message)
		}
	default:
		t.Fatalf("outcome %q (exit %d): %s\n%s", s.Outcome, code, s.Message, out)
	}
	runs := startProc(t, "coordctl", false, procEnv(), procBinary(t, "coordctl"), "--coordinator", c.grpcAddr, "runs", "--search", s.SearchID, "--json")
	if code, ok := runs.Wait(30 * time.Second); !ok || code != 0 {
		t.Fatalf("coordctl runs: exit %d\n%s", code, runs.describe())
	}
	for _, st := range s.Steps {
		if !strings.Contains(runs.Stdout(), st.RunID) {
			t.Errorf("run %s of step %d not stored under search %s", st.RunID, st.Index, s.SearchID)
		}
	}
}

// TestSearchSharedCPUInconclusive: a closed-loop search whose two agents
// are pinned to one CPU, which a busy process holds before them
// (startIdleAgents, spinOn; see TestClientBoundSharedCPU), ends
// inconclusive (client-bound: their threads wait for the CPU), never
// found, and names both. The test asks that the search stop at its first
// client-bound step, after passes only, within its four steps. Without
// the busy process the agents' waits sat at the rule's limit, and the
// search ran its four steps on passes in about one full e2e run of two.
func TestSearchSharedCPUInconclusive(t *testing.T) {
	pin := lastAllowedCPU(t)
	srv, ca := targettest.Start(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCoordinator(t)
	startIdleAgents(t, c, []string{"shared-a", "shared-b"}, "--cpus", pin)
	spinOn(t, pin, 60*time.Second)
	s, out, code := searchResult(t, c, "--slo", "p99<1s", "--connections-range", "32..4000", "-d", "2s", "--warmup", "1s",
		"--max-steps", "4", "--cacert", caFile, srv.URL())
	t.Logf("outcome %s: %s", s.Outcome, s.Message)
	if s.Outcome != "inconclusive" || code != 6 || len(s.Steps) == 0 || s.Steps[len(s.Steps)-1].Verdict != "inconclusive" {
		t.Fatalf("outcome %q (exit %d), %d steps: want the search to end at an inconclusive step\n%s", s.Outcome, code, len(s.Steps), out)
	}
	for _, st := range s.Steps[:len(s.Steps)-1] {
		if st.Verdict != "pass" {
			t.Errorf("step %d at %v: verdict %q before the inconclusive one, want pass\n%s", st.Index, st.Target, st.Verdict, out)
		}
	}
	if !slices.Equal(s.SaturatedAgents, []string{"shared-a", "shared-b"}) || !strings.Contains(s.Message, "too small") {
		t.Errorf("saturated %v: want both agents named; %s", s.SaturatedAgents, s.Message)
	}
}

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/target"
)

// TestProcAgentStopsWhenCoordinatorKilled kills -9 the coordinator process
// in the middle of a long run: its agent must stop sending load within 2 s
// (the run stream's end is the shutdown), stay up, and coordctl must fail
// with an error naming the coordinator, exit 5, and print and write
// (--json) the partial report of the intervals it received, marked so.
func TestProcAgentStopsWhenCoordinatorKilled(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, 1)

	dir := t.TempDir()
	jsonFile, hlogFile, csvFile := filepath.Join(dir, "run.json"), filepath.Join(dir, "run.hlog"), filepath.Join(dir, "run.csv")
	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"),
		"--coordinator", c.grpcAddr, "run", "-c", "4", "-d", "60s", "--cacert", caFile, "--json", jsonFile,
		"--hlog", hlogFile, "--csv", csvFile, srv.URL())

	// The run is under way: the target counts requests and coordctl has
	// printed the first merged interval ("[  1] ... req/s").
	waitRunUnderWay(t, srv, run, c.agents[0])

	c.coord.Kill()
	killedAt := time.Now()
	if _, ok := c.coord.Wait(5 * time.Second); !ok {
		t.Fatal("coordinator still running 5s after SIGKILL")
	}
	at3s := loadStopsWithin2s(t, srv, killedAt, c.agents[0])

	// coordctl fails, naming the coordinator.
	code, ok := run.Wait(10*time.Second - time.Since(killedAt))
	if !ok {
		t.Fatalf("coordctl run still running 10s after the coordinator was killed\n%s", run.describe())
	}
	stderr := run.Stderr()
	t.Logf("coordctl run: exit %d after the kill; stderr:\n%s", code, stderr)
	if code != 5 {
		t.Errorf("coordctl run exit status %d, want 5 (lost the coordinator, partial report)\n%s", code, run.describe())
	}
	if !strings.Contains(stderr, "coordctl: lost the coordinator "+c.grpcAddr+" during the run") {
		t.Errorf("coordctl run's error does not name the coordinator:\n%s", stderr)
	}
	stdout := run.Stdout()
	if !strings.Contains(stdout, "Requests/sec:") || !strings.Contains(stdout, "  Partial: lost the coordinator "+c.grpcAddr) {
		t.Errorf("coordctl printed no partial report for a run whose coordinator died:\n%s", stdout)
	}
	rep := readLossReport(t, jsonFile)
	printed := progressLines(stderr)
	var sum int64
	for _, pt := range rep.Timeline {
		sum += pt.Requests
		if n, ok := printed[pt.Index]; pt.DurationS == 1 && (!ok || n != pt.Requests) {
			t.Errorf("interval %d: %d requests in the report, %d printed (%v)", pt.Index, pt.Requests, n, ok)
		}
	}
	if !rep.Partial || !strings.HasPrefix(rep.CoordinatorLost, "lost the coordinator "+c.grpcAddr) || len(rep.Timeline) == 0 ||
		rep.Requests != sum || rep.Requests > at3s || rep.DurationS != float64(len(rep.Timeline)) {
		t.Errorf("--json: partial %v, coordinator_lost %q, %d intervals, %d requests (intervals sum to %d, target %d), window %vs",
			rep.Partial, rep.CoordinatorLost, len(rep.Timeline), rep.Requests, sum, at3s, rep.DurationS)
	}

	// The format files hold the intervals received too: a merged line
	// (.hlog) and a row (CSV) per interval, the same requests.
	hlogLines, csvRows, csvRequests := 0, 0, int64(0)
	for _, line := range strings.Split(readOr(t, hlogFile), "\n") {
		if line != "" && line[0] >= '0' && line[0] <= '9' {
			hlogLines++
		}
	}
	for i, line := range strings.Split(strings.TrimSpace(readOr(t, csvFile)), "\n") {
		if f := strings.Split(line, ","); i > 0 && len(f) > 4 {
			n, _ := strconv.ParseInt(f[4], 10, 64)
			csvRows, csvRequests = csvRows+1, csvRequests+n
		}
	}
	if hlogLines != len(rep.Timeline) || csvRows != len(rep.Timeline) || csvRequests != rep.Requests {
		t.Errorf("after losing the coordinator: %d .hlog lines, %d CSV rows of %d requests; want %d intervals of %d requests",
			hlogLines, csvRows, csvRequests, len(rep.Timeline), rep.Requests)
	}

	// The agent survived its coordinator (its cleanup checks that it is
	// still running and exits 0 on SIGTERM).
	if c.agents[0].Exited() {
		t.Errorf("agent exited when the coordinator died\n%s", c.agents[0].describe())
	}
}

// waitRunUnderWay waits until the target counts requests and coordctl run
// has printed the first merged interval ("[  1] ... req/s").
func waitRunUnderWay(t *testing.T, srv *target.Server, run, agent *proc) {
	t.Helper()
	if err := waitUntil(procReadyTimeout, run, func(context.Context) error {
		if n := srv.Requests(); n == 0 || !strings.Contains(run.Stderr(), "req/s") {
			return fmt.Errorf("target counted %d requests; coordctl stderr %q", n, run.Stderr())
		}
		return nil
	}); err != nil {
		t.Fatalf("run not under way: %v\n%s\n%s", err, run.describe(), agent.describe())
	}
}

// loadStopsWithin2s watches the target's request count from killedAt (the
// coordinator's kill) to killedAt+3s: it must not grow after killedAt+2s.
// It returns the count at killedAt+3s.
func loadStopsWithin2s(t *testing.T, srv *target.Server, killedAt time.Time, agent *proc) int64 {
	t.Helper()
	atKill := srv.Requests()
	// Watch the count until kill+2s, noting when it last grew.
	last, lastGrowth := atKill, killedAt
	for time.Since(killedAt) < 2*time.Second {
		time.Sleep(procPoll)
		if n := srv.Requests(); n != last {
			last, lastGrowth = n, time.Now()
		}
	}
	at2s := srv.Requests()
	if at2s != last {
		lastGrowth = time.Now()
	}
	// It must not grow from kill+2s to kill+3s.
	for time.Since(killedAt) < 3*time.Second {
		time.Sleep(procPoll)
	}
	at3s := srv.Requests()
	t.Logf("target counted %d requests at the kill, %d at +2s, %d at +3s; last growth %v after the kill",
		atKill, at2s, at3s, lastGrowth.Sub(killedAt).Round(time.Millisecond))
	if at3s != at2s {
		t.Errorf("the agent still sends load 2s after the coordinator died: %d requests at kill+2s, %d at kill+3s\n%s",
			at2s, at3s, agent.describe())
	}
	return at3s
}

// TestProcAgentStopsWhenCoordinatorKilledTLS is the hard stop over mutual
// TLS: kill -9 of the coordinator mid-run, and its agent stops sending load
// within 2 s (gRPC keepalive over TLS ends the run stream) and stays up.
func TestProcAgentStopsWhenCoordinatorKilledTLS(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcClusterWith(t, 1, newProcTLS(t))
	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"),
		c.coordctlArgs("run", "-c", "4", "-d", "60s", "--cacert", caFile, srv.URL())...)
	waitRunUnderWay(t, srv, run, c.agents[0])
	c.coord.Kill()
	killedAt := time.Now()
	if _, ok := c.coord.Wait(5 * time.Second); !ok {
		t.Fatal("coordinator still running 5s after SIGKILL")
	}
	loadStopsWithin2s(t, srv, killedAt, c.agents[0])
	run.mayExit.Store(true)
	if _, ok := run.Wait(10*time.Second - time.Since(killedAt)); !ok {
		t.Errorf("coordctl run still running 10s after the coordinator was killed\n%s", run.describe())
	}
	if c.agents[0].Exited() {
		t.Errorf("agent exited when the coordinator died\n%s", c.agents[0].describe())
	}
}

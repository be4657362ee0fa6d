package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestProcAgentStopsWhenCoordinatorKilled kills -9 the coordinator process
// in the middle of a long run: its agent must stop sending load within 2 s
// (the run stream's end is the shutdown), stay up, and coordctl must fail
// with an error naming the coordinator.
func TestProcAgentStopsWhenCoordinatorKilled(t *testing.T) {
	srv, ca := startTarget(t)
	caFile, _, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, 1)

	run := startProc(t, "coordctl run", false, procEnv(), procBinary(t, "coordctl"),
		"--coordinator", c.grpcAddr, "run", "-c", "4", "-d", "60s", "--cacert", caFile, srv.URL())

	// The run is under way: the target counts requests and coordctl has
	// printed the first merged interval ("[  1] ... req/s").
	if err := waitUntil(procReadyTimeout, run, func(context.Context) error {
		if n := srv.Requests(); n == 0 || !strings.Contains(run.Stderr(), "req/s") {
			return fmt.Errorf("target counted %d requests; coordctl stderr %q", n, run.Stderr())
		}
		return nil
	}); err != nil {
		t.Fatalf("run not under way: %v\n%s\n%s", err, run.describe(), c.agents[0].describe())
	}

	c.coord.Kill()
	killedAt := time.Now()
	if _, ok := c.coord.Wait(5 * time.Second); !ok {
		t.Fatal("coordinator still running 5s after SIGKILL")
	}
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
			at2s, at3s, c.agents[0].describe())
	}

	// coordctl fails, naming the coordinator.
	code, ok := run.Wait(10*time.Second - time.Since(killedAt))
	if !ok {
		t.Fatalf("coordctl run still running 10s after the coordinator was killed\n%s", run.describe())
	}
	stderr := run.Stderr()
	t.Logf("coordctl run: exit %d after the kill; stderr:\n%s", code, stderr)
	if code != 1 {
		t.Errorf("coordctl run exit status %d, want 1\n%s", code, run.describe())
	}
	if !strings.Contains(stderr, "coordctl: ") || !strings.Contains(stderr, "coordinator") {
		t.Errorf("coordctl run's error does not mention the coordinator:\n%s", stderr)
	}
	if strings.Contains(run.Stdout(), "Requests/sec:") {
		t.Errorf("coordctl printed a report for a run whose coordinator died:\n%s", run.Stdout())
	}

	// The agent survived its coordinator (its cleanup checks that it is
	// still running and exits 0 on SIGTERM).
	if c.agents[0].Exited() {
		t.Errorf("agent exited when the coordinator died\n%s", c.agents[0].describe())
	}
}

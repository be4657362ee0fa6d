package coordinator_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// stopEnv is the built-in target and an in-process cluster of two agents.
func stopEnv(t *testing.T) (*target.Server, []byte, *localcluster.Cluster) {
	t.Helper()
	srv, b := targettest.Start(t)
	c, err := localcluster.Start(context.Background(), 2, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	return srv, b.CAPEM, c
}

// TestStopRun: StopRun in the middle of a 10 s run ends every agent's
// window: the result says so, covers the shortened window (its RPS over
// it), counts every request the target saw, and the run's ID is then
// unknown to StopRun; the agents are free again.
func TestStopRun(t *testing.T) {
	srv, ca, c := stopEnv(t)
	co := c.Coordinator
	if err := co.StopRun("no-such-run"); status.Code(err) != codes.NotFound {
		t.Errorf("StopRun(unknown) = %v, want NotFound", err)
	}
	if err := co.StopRun(""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("StopRun(\"\") = %v, want InvalidArgument", err)
	}

	p := plan.Plan{URL: srv.URL(), Connections: 4, Duration: 10 * time.Second, TLS: plan.TLS{CAPEM: ca}}
	var runID string
	var stoppedAt time.Time
	began := time.Now()
	res, err := co.RunPlanWith(context.Background(), p, coordinator.RunHooks{
		Accepted: func(a *pb.RunAccepted) { runID = a.GetRunId() },
		Progress: func(pr *pb.Progress) {
			if pr.GetIndex() == 0 { // one interval merged: stop
				stoppedAt = time.Now()
				if err := co.StopRun(runID); err != nil {
					t.Errorf("StopRun(%s) = %v", runID, err)
				}
				if err := co.StopRun(runID); err != nil {
					t.Errorf("StopRun again = %v, want nil (it changes nothing)", err)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if runID == "" || res.GetRunId() != runID {
		t.Errorf("accepted run ID %q, result's %q", runID, res.GetRunId())
	}
	rep, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result %v after StopRun; run took %v; window %.3fs, %d requests, %.0f req/s", time.Since(stoppedAt), took, rep.DurationS, rep.Requests, rep.RPS)
	if !res.GetStoppedEarly() || !rep.StoppedEarly {
		t.Error("result not marked stopped early")
	}
	if took > 6*time.Second {
		t.Errorf("the stopped run took %v, want well under its 10 s", took)
	}
	if rep.DurationS < 1 || rep.DurationS > 4 {
		t.Errorf("window %.3fs, want the shortened one (stopped just after 1 s)", rep.DurationS)
	}
	if rep.Requests == 0 || rep.RPS != float64(rep.Requests)/rep.DurationS {
		t.Errorf("requests %d, rps %v over %.3fs", rep.Requests, rep.RPS, rep.DurationS)
	}
	if rep.Issued != rep.Requests+rep.ErrorTotal()+rep.InFlight {
		t.Errorf("issued %d != requests %d + errors %d + in flight %d", rep.Issued, rep.Requests, rep.ErrorTotal(), rep.InFlight)
	}
	if got := srv.Requests(); got != rep.Requests+rep.InFlight {
		t.Errorf("target counted %d requests, report %d + %d in flight", got, rep.Requests, rep.InFlight)
	}
	for _, a := range rep.AgentRows {
		if a.Requests == 0 || a.Error != "" {
			t.Errorf("agent row %+v", a)
		}
	}
	if err := co.StopRun(runID); status.Code(err) != codes.NotFound {
		t.Errorf("StopRun after the run = %v, want NotFound", err)
	}
	if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
		t.Errorf("agents after the stopped run: %v", err)
	}
}

// TestStopRunBeforeStart: a stop while the agents prepare ends the run with
// Canceled (nothing was measured, nothing was sent to the target) and frees
// the agents for the next run.
func TestStopRunBeforeStart(t *testing.T) {
	srv, ca, c := stopEnv(t)
	co := c.Coordinator
	p := plan.Plan{URL: srv.URL(), Connections: 4, Duration: 10 * time.Second, TLS: plan.TLS{CAPEM: ca}}
	began := time.Now()
	res, err := co.RunPlanWith(context.Background(), p, coordinator.RunHooks{
		Accepted: func(a *pb.RunAccepted) {
			if err := co.StopRun(a.GetRunId()); err != nil {
				t.Errorf("StopRun at acceptance = %v", err)
			}
		},
	})
	t.Logf("RunPlanWith after %v: %v", time.Since(began), err)
	if res != nil || status.Code(err) != codes.Canceled {
		t.Fatalf("RunPlanWith stopped before its start = %v, %v; want nil and Canceled", res, err)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the target saw %d requests from a run stopped before its start", n)
	}
	if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
		t.Fatalf("agents after the run stopped before its start: %v", err)
	}
	// The agents take the next run.
	p.Duration = time.Second
	if res, err := co.RunPlan(context.Background(), p, nil); err != nil || res.GetStoppedEarly() || res.GetCounters().GetRequests() == 0 {
		t.Errorf("next run: %v, stopped early %v, requests %d", err, res.GetStoppedEarly(), res.GetCounters().GetRequests())
	}
}

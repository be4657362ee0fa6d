package coordinator_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/metrics/metricstest"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestMetricsOfALostAgent: when a run loses an agent (a silent one, given
// up past the silence bound; the default policy aborts), the coordinator's
// /metrics shows it lost, the run partial, the one agent left running until
// the end, and the window's requests, the good agent's.
func TestMetricsOfALostAgent(t *testing.T) {
	srv, b := targettest.Start(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 1, CPUsPerAgent: 1,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Coordinator: func(cfg *coordinator.Config) { cfg.MetricsAddr = "127.0.0.1:0" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	startRogue(t, "zz-silent", c.Coordinator.GossipAddr(), func(time.Time, time.Duration) *pb.RunResponse { return nil })
	if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: 20 * time.Second, Interval: 200 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	var lostRunning float64 = -1
	res, err := c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{
		Progress: func(pr *pb.Progress) {
			if pr.GetPoint().GetPartial() && lostRunning < 0 {
				lostRunning = metricstest.Value(metricstest.Scrape(t, c.Coordinator.MetricsAddr(), false), "phalanx_run_agents_running", "run_id", pr.GetRunId())
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetPartial() {
		t.Fatalf("result not partial: %v", res.GetAgents())
	}
	if lostRunning != 1 {
		t.Errorf("phalanx_run_agents_running after the loss = %v, want 1", lostRunning)
	}
	fams := metricstest.Scrape(t, c.Coordinator.MetricsAddr(), false)
	run := []string{"run_id", res.GetRunId()}
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"phalanx_run_agents_lost", run, 1},
		{"phalanx_run_requests_total", run, float64(res.GetCounters().GetRequests())},
		{"phalanx_run_running", run, 0},
		{"phalanx_runs_total", []string{"result", "partial"}, 1},
		{"phalanx_runs_total", []string{"result", "ok"}, 0},
		{"phalanx_runs_in_progress", nil, 0},
	} {
		if got := metricstest.Value(fams, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	if res.GetCounters().GetRequests() == 0 {
		t.Error("the good agent completed no request")
	}
}

package e2e

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/metrics/metricstest"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestMetricsMatchReport scrapes the /metrics of a running coordinator and
// of its two agents, during an open-loop run and after it, and parses them
// with Prometheus's text parser (and its protobuf decoder, for the native
// histogram): the coordinator's per-run counters equal the report's
// (requests, responses by status, errors by kind, bytes read, the latency
// histogram's count), each agent's equal its row, the targets are the
// plan's rate and each agent's part, and the health metrics count the run.
func TestMetricsMatchReport(t *testing.T) {
	srv, ca := startTarget(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 2, CPUsPerAgent: 1, Logger: quietLogger(),
		Coordinator: func(cfg *coordinator.Config) { cfg.MetricsAddr = "127.0.0.1:0" },
		Agent:       func(_ int, cfg *agent.Config) { cfg.MetricsAddr = "127.0.0.1:0" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	coord := c.Coordinator.MetricsAddr()

	const rate = 400
	p := plan.Plan{URL: srv.URL(), Connections: 8, Duration: 3 * time.Second, Rate: rate, Load: plan.OpenLoop, TLS: plan.TLS{CAPEM: ca.CAPEM}}
	var during map[string]*dto.MetricFamily
	var runID string
	res, err := c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{
		Progress: func(pr *pb.Progress) {
			if during == nil { // the first interval: the run is in progress
				runID, during = pr.GetRunId(), metricstest.Scrape(t, coord, false)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.Status["200"] == 0 {
		t.Fatalf("the run completed no request: %d requests, status %v", rep.Requests, rep.Status)
	}
	if runID != rep.RunID {
		t.Fatalf("progress run ID %q, report %q", runID, rep.RunID)
	}
	run := []string{"run_id", rep.RunID}
	for name, want := range map[string]float64{"phalanx_run_running": 1, "phalanx_run_agents_running": 2, "phalanx_run_target_rps": rate} {
		if got := metricstest.Value(during, name, run...); got != want {
			t.Errorf("during the run: %s = %v, want %v", name, got, want)
		}
	}
	if got := metricstest.Value(during, "phalanx_runs_in_progress"); got != 1 {
		t.Errorf("during the run: phalanx_runs_in_progress = %v, want 1", got)
	}

	fams := metricstest.Scrape(t, coord, false)
	check := func(what, name string, got float64, want int64) {
		t.Helper()
		if got != float64(want) {
			t.Errorf("%s: %s = %v, want %d (the report's)", what, name, got, want)
		}
	}
	check("coordinator", "phalanx_run_requests_total", metricstest.Value(fams, "phalanx_run_requests_total", run...), rep.Requests)
	check("coordinator", "phalanx_run_read_bytes_total", metricstest.Value(fams, "phalanx_run_read_bytes_total", run...), rep.BytesRead)
	for code, n := range rep.Status {
		check("coordinator", "phalanx_run_responses_total{code="+code+"}", metricstest.Value(fams, "phalanx_run_responses_total", append(run, "code", code)...), n)
	}
	var errs int64
	for _, m := range fams["phalanx_run_errors_total"].GetMetric() {
		errs += int64(m.GetCounter().GetValue())
	}
	check("coordinator", "phalanx_run_errors_total (all kinds)", float64(errs), rep.ErrorTotal())
	for kind, n := range rep.Errors {
		check("coordinator", "phalanx_run_errors_total{kind="+kind+"}", metricstest.Value(fams, "phalanx_run_errors_total", append(run, "kind", kind)...), n)
	}
	if n := len(fams["phalanx_run_errors_total"].GetMetric()); n != int(measure.NumErrorKinds) {
		t.Errorf("phalanx_run_errors_total has %d kinds, want all %d", n, measure.NumErrorKinds)
	}
	lat := metricstest.Series(fams, "phalanx_run_latency_seconds", run...).GetHistogram()
	check("coordinator", "phalanx_run_latency_seconds_count", float64(lat.GetSampleCount()), rep.Latency.Count)
	if b := lat.GetBucket(); len(b) == 0 || b[len(b)-1].GetCumulativeCount() > lat.GetSampleCount() {
		t.Errorf("latency classic buckets %v for %d samples", b, lat.GetSampleCount())
	}
	if mean := lat.GetSampleSum() / float64(lat.GetSampleCount()) * 1e6; mean < 0.99*rep.Latency.Mean || mean > 1.01*rep.Latency.Mean {
		t.Errorf("latency sum/count %.1fus, report's mean %.1fus", mean, rep.Latency.Mean)
	}
	for name, want := range map[string]float64{"phalanx_run_running": 0, "phalanx_run_agents_running": 0, "phalanx_run_agents_lost": 0, "phalanx_run_target_rps": rate} {
		if got := metricstest.Value(fams, name, run...); got != want {
			t.Errorf("after the run: %s = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]float64{"phalanx_runs_in_progress": 0, "phalanx_agents_known": 2, "phalanx_gossip_members": 3} {
		if got := metricstest.Value(fams, name); got != want {
			t.Errorf("after the run: %s = %v, want %v", name, got, want)
		}
	}
	if got := metricstest.Value(fams, "phalanx_runs_total", "result", "ok"); got != 1 {
		t.Errorf("phalanx_runs_total{result=ok} = %v, want 1", got)
	}
	for _, a := range rep.AgentRows {
		if metricstest.Value(fams, "phalanx_run_agent_cpu_busy_ratio", append(run, "agent", a.Name)...) < 0 {
			t.Errorf("no phalanx_run_agent_cpu_busy_ratio for agent %s", a.Name)
		}
	}

	// The native histogram, as a Prometheus that negotiates protobuf
	// reads it: schema 3, its buckets holding every sample.
	native := metricstest.Series(metricstest.Scrape(t, coord, true), "phalanx_run_latency_seconds", run...).GetHistogram()
	var inBuckets, count int64
	for _, d := range native.GetPositiveDelta() {
		count += d
		inBuckets += count
	}
	if native.GetSchema() != 3 || uint64(inBuckets) != native.GetSampleCount() || native.GetSampleCount() != uint64(rep.Latency.Count) || len(native.GetBucket()) == 0 {
		t.Errorf("native histogram: schema %d, %d in buckets of %d samples (report %d), %d classic buckets",
			native.GetSchema(), inBuckets, native.GetSampleCount(), rep.Latency.Count, len(native.GetBucket()))
	}

	// Each agent's /metrics has its share: its row's requests and errors,
	// its part of the rate.
	for i, a := range c.Agents {
		row := rep.AgentRows[i]
		if row.Name != a.Name() {
			t.Fatalf("agent row %d is %s, agent %s", i, row.Name, a.Name())
		}
		// The agent ends its share's series as its Run handler returns,
		// which the coordinator sees as the stream's end: by now, or
		// within moments.
		var fams map[string]*dto.MetricFamily
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			fams = metricstest.Scrape(t, a.MetricsAddr(), false)
			if metricstest.Value(fams, "phalanx_runs_in_progress") == 0 || time.Now().After(deadline) {
				break
			}
		}
		check("agent "+row.Name, "phalanx_run_requests_total", metricstest.Value(fams, "phalanx_run_requests_total", run...), row.Requests)
		var errs int64
		for _, m := range fams["phalanx_run_errors_total"].GetMetric() {
			errs += int64(m.GetCounter().GetValue())
		}
		check("agent "+row.Name, "phalanx_run_errors_total (all kinds)", float64(errs), row.Errors)
		if got := metricstest.Value(fams, "phalanx_run_target_rps", run...); got != rate/2 {
			t.Errorf("agent %s: phalanx_run_target_rps = %v, want its part %d", row.Name, got, rate/2)
		}
		if got := metricstest.Series(fams, "phalanx_run_latency_seconds", run...).GetHistogram().GetSampleCount(); got != uint64(row.Requests) {
			t.Errorf("agent %s: latency count %d, want its requests %d", row.Name, got, row.Requests)
		}
		for name, want := range map[string]float64{"phalanx_runs_in_progress": 0, "phalanx_gossip_members": 3} {
			if got := metricstest.Value(fams, name); got != want {
				t.Errorf("agent %s: %s = %v, want %v", row.Name, name, got, want)
			}
		}
		if got := metricstest.Value(fams, "phalanx_runs_total", "result", "ok"); got != 1 {
			t.Errorf("agent %s: phalanx_runs_total{result=ok} = %v, want 1", row.Name, got)
		}
		if got := metricstest.Value(fams, "phalanx_agent_state", "state", "idle"); got != 1 {
			t.Errorf("agent %s: phalanx_agent_state{state=idle} = %v, want 1", row.Name, got)
		}
	}
}

// TestMetricsOfAnAbandonedRun: a run abandoned mid-way (its RunPlan
// cancelled, as coordctl's second Ctrl-C does) counts as failed on the
// coordinator's /metrics, and on the agent's as a share whose stream
// ended under it: a stream error and a partial share, the agent idle
// again, the share's series kept.
func TestMetricsOfAnAbandonedRun(t *testing.T) {
	srv, ca := startTarget(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: quietLogger(),
		Coordinator: func(cfg *coordinator.Config) { cfg.MetricsAddr = "127.0.0.1:0" },
		Agent:       func(_ int, cfg *agent.Config) { cfg.MetricsAddr = "127.0.0.1:0" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	var runID string
	p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: 20 * time.Second, TLS: plan.TLS{CAPEM: ca.CAPEM}}
	if _, err := c.Coordinator.RunPlanWith(ctx, p, coordinator.RunHooks{
		Progress: func(pr *pb.Progress) { runID = pr.GetRunId(); abandon() },
	}); err == nil {
		t.Fatal("an abandoned run returned no error")
	}
	if got := metricstest.Value(metricstest.Scrape(t, c.Coordinator.MetricsAddr(), false), "phalanx_runs_total", "result", "failed"); got != 1 {
		t.Errorf("coordinator: phalanx_runs_total{result=failed} = %v, want 1", got)
	}
	addr := c.Agents[0].MetricsAddr()
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fams = metricstest.Scrape(t, addr, false)
		if metricstest.Value(fams, "phalanx_runs_in_progress") == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"phalanx_runs_in_progress", nil, 0},
		{"phalanx_stream_errors_total", nil, 1},
		{"phalanx_runs_total", []string{"result", "partial"}, 1},
		{"phalanx_agent_state", []string{"state", "idle"}, 1},
		{"phalanx_run_running", []string{"run_id", runID}, 0},
	} {
		if got := metricstest.Value(fams, m.name, m.labels...); got != m.want {
			t.Errorf("agent: %s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	if got := metricstest.Value(fams, "phalanx_run_requests_total", "run_id", runID); got <= 0 {
		t.Errorf("agent: phalanx_run_requests_total of the abandoned share = %v, want its first interval's requests", got)
	}
}

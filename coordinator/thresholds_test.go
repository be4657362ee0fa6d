package coordinator_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestThresholdsOnStagesAndStore runs a two-stage closed-loop plan with
// thresholds on the window, a phase and each stage, on a coordinator with
// a run store: the result holds each outcome in order (a stage the plan
// lacks has no data and fails), and the store holds the finished run with
// its labels, thresholds and one interval per timeline point.
func TestThresholdsOnStagesAndStore(t *testing.T) {
	srv, b := targettest.Start(t)
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 1, CPUsPerAgent: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	stages := []plan.Stage{{Duration: 2 * time.Second, Connections: 2}, {Duration: 2 * time.Second, Connections: 2}}
	p := plan.Plan{URL: srv.URL(), Connections: 2, Stages: stages, Load: plan.LoadFor(0, stages), TLS: plan.TLS{CAPEM: b.CAPEM}}

	// Bad options are refused before any agent is chosen.
	// A threshold on a stage the plan lacks could only fail, after the load.
	for _, o := range []coordinator.RunOptions{{Thresholds: []string{"p99<3"}}, {AbortOnFail: true}, {Thresholds: []string{"stage1.p99<1s", "stage7.p99<1s"}}} {
		if _, err := c.Coordinator.Execute(context.Background(), p, o, coordinator.RunHooks{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Execute(%+v) = %v, want InvalidArgument", o, err)
		} else if o.Thresholds != nil && o.Thresholds[0] == "stage1.p99<1s" && !strings.Contains(err.Error(), `"stage7.p99<1s": the plan has 2 stages, stage0 to stage1`) {
			t.Errorf("Execute(%v) = %v, want it to name stage7 and the plan's stages", o.Thresholds, err)
		}
	}

	ths := []string{"errors<1%", "stage0.rps>0", "stage1.p99<1us", "tls_full.p99<30s", "rps>1e9"}
	res, err := c.Coordinator.Execute(context.Background(), p, coordinator.RunOptions{Thresholds: ths, Tags: []string{"t1"}, Note: "n", SearchID: "s1"}, coordinator.RunHooks{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ pass, noData bool }{{true, false}, {true, false}, {false, false}, {true, false}, {false, false}}
	got := res.GetThresholds()
	if len(got) != len(ths) {
		t.Fatalf("%d threshold results, want %d: %v", len(got), len(ths), got)
	}
	for i, w := range want {
		if got[i].GetThreshold() != ths[i] || got[i].GetPass() != w.pass || got[i].GetNoData() != w.noData {
			t.Errorf("threshold %s = %v, want pass %v no_data %v", ths[i], got[i], w.pass, w.noData)
		}
	}
	if res.GetAbortedByThreshold() != "" || res.GetStoppedEarly() {
		t.Errorf("a run without --abort-on-fail was cut: aborted by %q, stopped early %v", res.GetAbortedByThreshold(), res.GetStoppedEarly())
	}

	st := c.Coordinator.Store()
	r, err := st.Get(res.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	if r.GetState() != pb.RunState_RUN_STATE_FINISHED || r.GetResult().GetRunId() != res.GetRunId() || len(r.GetIntervals()) != len(res.GetTimeline()) ||
		strings.Join(r.GetTags(), ",") != "t1" || r.GetNote() != "n" || r.GetSearchId() != "s1" || len(r.GetThresholds()) != len(ths) ||
		len(r.GetAgents()) != 1 || r.GetPlan().GetTls().GetCaPem() != nil {
		t.Errorf("stored run: state %v, %d intervals (timeline %d), tags %v, note %q, search %q, %d thresholds, %d agents, CA kept %v",
			r.GetState(), len(r.GetIntervals()), len(res.GetTimeline()), r.GetTags(), r.GetNote(), r.GetSearchId(), len(r.GetThresholds()),
			len(r.GetAgents()), r.GetPlan().GetTls().GetCaPem() != nil)
	}
}

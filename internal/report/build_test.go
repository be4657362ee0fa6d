package report

import (
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestBuildModeFromPlanLoad: open loop is the plan's load model, not
// guessed from other fields; a timeline point's percentiles come from its
// histogram.
func TestBuildModeFromPlanLoad(t *testing.T) {
	h := hist.New()
	for v := int64(1); v <= 100; v++ {
		h.RecordMicros(v)
	}
	run := &Run{ID: "r", Load: plan.OpenLoop, Window: time.Second, Histograms: hist.NewSet(),
		Timeline: []Interval{{Length: time.Second, Requests: 100, V2: [hist.NumKinds][]byte{hist.Latency: h.EncodeV2()}}}}
	run.Histograms.Service.RecordMicros(7)
	r, err := Build(run)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "open" || r.LatencyBasis != "intended send" || r.ServiceTimeUs == nil || r.ServiceTimeUs.Max != 7 {
		t.Errorf("open loop: mode %q basis %q service %+v", r.Mode, r.LatencyBasis, r.ServiceTimeUs)
	}
	if pt := r.Timeline[0]; pt.P50Us != 50 || pt.P90Us != 90 || pt.P99Us != 99 || pt.MaxUs != 100 || pt.RPS != 100 {
		t.Errorf("timeline point %+v", pt)
	}
	run.Load = plan.ClosedLoop
	if r, _ = Build(run); r.Mode != "closed" || r.ServiceTimeUs != nil {
		t.Errorf("closed loop: mode %q service %+v", r.Mode, r.ServiceTimeUs)
	}
}

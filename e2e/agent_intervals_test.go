package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestAgentIntervalsKeptWhenAsked: a result keeps no agent intervals by
// default (its size does not grow with the agents), and with
// RunHooks.AgentIntervals each agent's row holds every interval it sent,
// in order, whose requests add up to its row and whose latency histograms
// merge, across agents, to the timeline's exactly.
func TestAgentIntervalsKeptWhenAsked(t *testing.T) {
	srv, ca := startTarget(t)
	c := startCluster(t, 2)
	p := plan.Plan{URL: srv.URL(), Connections: 4, Duration: 2 * time.Second, TLS: plan.TLS{CAPEM: ca.CAPEM}}

	res, err := c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.GetAgents() {
		if len(a.GetIntervals()) != 0 {
			t.Errorf("agent %s: %d intervals kept unasked", a.GetName(), len(a.GetIntervals()))
		}
	}

	res, err = c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{AgentIntervals: true})
	if err != nil {
		t.Fatal(err)
	}
	run, err := wire.RunFromProto(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Agents) != 2 || len(run.Timeline) != 2 {
		t.Fatalf("%d agents, %d intervals", len(run.Agents), len(run.Timeline))
	}
	merged := make([]*hist.Histogram, len(run.Timeline))
	for i := range merged {
		merged[i] = hist.New()
	}
	for _, a := range run.Agents {
		if len(a.Intervals) != len(run.Timeline) {
			t.Fatalf("agent %s: %d intervals kept, the timeline has %d", a.Name, len(a.Intervals), len(run.Timeline))
		}
		var requests int64
		for k, ai := range a.Intervals {
			h, err := hist.Decode(ai.LatencyV2)
			if err != nil {
				t.Fatal(err)
			}
			iv := struct {
				report.AgentInterval
				Latency *hist.Histogram
			}{ai, h}
			if int(iv.Index) != k || iv.Start < time.Duration(k)*time.Second || iv.Start > time.Duration(k)*time.Second+100*time.Millisecond || iv.Latency.Count() != iv.Requests {
				t.Errorf("agent %s interval %d: index %d, start %v, %d samples for %d requests", a.Name, k, iv.Index, iv.Start, iv.Latency.Count(), iv.Requests)
			}
			requests += iv.Requests
			if err := merged[k].Merge(iv.Latency); err != nil {
				t.Fatal(err)
			}
		}
		if requests != a.Requests {
			t.Errorf("agent %s: intervals hold %d requests, its row %d", a.Name, requests, a.Requests)
		}
	}
	for k, pt := range run.Timeline {
		lat, err := pt.Histogram(hist.Latency)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := merged[k].Encode()
		b, _ := lat.Encode()
		if string(a) != string(b) {
			t.Errorf("interval %d: the agents' histograms (%d samples) do not merge to the timeline's (%d)", k, merged[k].Count(), lat.Count())
		}
	}
}

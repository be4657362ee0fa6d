package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestSilentAgentIsLostAndAborts: an agent that starts and then sends
// nothing (alive but silent) is given up once its first interval is
// SilenceIntervals intervals + SilenceGrace overdue; under the default
// policy (abort) the other agent is stopped then, the result is partial and
// aborted with a window that ends near the loss (not the planned 20 s), the
// silent agent's row names it and how, its stream is ended, the Lost hook
// says so, progress goes on with partial points, and every request the
// good agent made is in the result.
func TestSilentAgentIsLostAndAborts(t *testing.T) {
	srv, b := targettest.Start(t)
	c := startOneAgent(t)
	rogue := startRogue(t, "zz-silent", c.Coordinator.GossipAddr(), func(time.Time, time.Duration) *pb.RunResponse { return nil })
	if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	const interval = 200 * time.Millisecond
	p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: 20 * time.Second, Interval: interval, TLS: plan.TLS{CAPEM: b.CAPEM}}
	var lost []*pb.AgentLost
	var partial int
	began := time.Now()
	res, err := c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{
		Lost: func(l *pb.AgentLost) { lost = append(lost, l) },
		Progress: func(pr *pb.Progress) {
			if pr.GetPoint().GetPartial() {
				partial++
			}
		},
	})
	if err != nil {
		t.Fatalf("RunPlan: %v", err)
	}
	took := time.Since(began)
	bound := interval + coordinator.SilenceIntervals*interval + coordinator.SilenceGrace // interval 0's due time, plus the limit
	t.Logf("run returned after %v; window %v; loss bound %v after the start", took.Round(time.Millisecond), res.GetWindow().AsDuration(), bound)
	if !res.GetPartial() || !res.GetAborted() || res.GetStoppedEarly() {
		t.Errorf("partial %v, aborted %v, stopped early %v; want true, true, false", res.GetPartial(), res.GetAborted(), res.GetStoppedEarly())
	}
	if w := res.GetWindow().AsDuration(); w < bound || w > bound+3*time.Second {
		t.Errorf("window %v, want about the loss at %v (its bound), not the planned 20s", w, bound)
	}
	rows := map[string]*pb.AgentResult{}
	for _, a := range res.GetAgents() {
		rows[a.GetName()] = a
	}
	rr := rows["zz-silent"]
	if rr == nil || !rr.GetLost() || !strings.HasPrefix(rr.GetError(), "agent zz-silent: silent for ") {
		t.Fatalf("silent agent's row %v: want lost, \"agent zz-silent: silent for ...\"", rr)
	}
	if at := rr.GetLostAt().AsDuration(); at < bound || at > bound+2*time.Second {
		t.Errorf("lost at %v, want just after its bound %v", at, bound)
	}
	if len(lost) != 1 || lost[0].GetAgent() != "zz-silent" || !lost[0].GetAborting() {
		t.Errorf("Lost hook calls %v, want one for zz-silent, aborting", lost)
	}
	if partial == 0 {
		t.Error("no partial progress after the loss: progress stopped")
	}
	good := rows["agent-1"]
	if good == nil || good.GetLost() || good.GetRequests() == 0 || res.GetCounters().GetRequests() != good.GetRequests() {
		t.Errorf("agent-1 row %v; window requests %d", good, res.GetCounters().GetRequests())
	}
	if got := srv.Requests(); got != good.GetRequests()+good.GetInFlight() {
		t.Errorf("target saw %d requests; agent-1 reports %d + %d in flight", got, good.GetRequests(), good.GetInFlight())
	}
	select {
	case <-rogue.streamEnd:
	case <-time.After(5 * time.Second):
		t.Error("the coordinator did not end the silent agent's stream")
	}
}

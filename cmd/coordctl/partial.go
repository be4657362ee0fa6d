package main

import (
	"fmt"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// received is what coordctl has received of a run in progress: its
// acceptance, every merged interval (Progress carries each point with its
// latency histogram and counters) and every loss. When the coordinator is
// lost mid-run, it is enough to build a partial report.
type received struct {
	runID    string
	agents   int
	points   []*pb.TimelinePoint
	counts   []*pb.Counters
	lost     []*pb.AgentLost
	firstEnd time.Time // when the first point came, less its end's offset: the window's start, estimated
	// agentIntervals, set before the run, asks the coordinator for every
	// agent's intervals in the result (RunPlanRequest.agent_intervals).
	agentIntervals bool
}

func (rc *received) accepted(a *pb.RunAccepted) {
	rc.runID, rc.agents = a.GetRunId(), int(a.GetAgents())
}

func (rc *received) progress(pr *pb.Progress) {
	if rc.runID == "" {
		rc.runID = pr.GetRunId()
	}
	pt := pr.GetPoint()
	if pt == nil {
		return // a coordinator that sends no points: nothing to build on
	}
	if len(rc.points) == 0 {
		rc.firstEnd = time.Now().Add(-(pt.GetStart().AsDuration() + pt.GetLength().AsDuration()))
	}
	rc.points = append(rc.points, pt)
	rc.counts = append(rc.counts, pr.GetCounters())
}

// lostCoordinator is submit's error when the coordinator's stream broke
// after the run was accepted: what was received until then is kept.
type lostCoordinator struct{ err error }

func (e *lostCoordinator) Error() string { return e.err.Error() }
func (e *lostCoordinator) Unwrap() error { return e.err }

// report builds the partial report of plan p from what was received, after
// losing the coordinator (how says so): counters and latency from the
// merged intervals, the window to the end of the last one (never longer
// than the load received), no phase histograms, warm-up or agent rows, and
// in flight unknown (0: issued counts the requests that ended). Errors: a
// corrupt histogram or counters.
func (rc *received) report(p *pb.Plan, how string) (*report.Report, error) {
	run, err := rc.run(p, how)
	if err != nil {
		return nil, err
	}
	return report.Build(run)
}

// run is the partial report's model (report's), which the format files
// (--hgrm, --hlog, --csv) are written from: latency only, merged intervals
// only.
func (rc *received) run(p *pb.Plan, how string) (*report.Run, error) {
	pl := wire.PlanFromProto(p)
	run := &report.Run{
		ID: rc.runID, Target: pl.URL, Load: pl.Load, Connections: int64(pl.Connections),
		PlanDuration: pl.Duration, PlanRequests: pl.Requests, StartedAt: rc.firstEnd,
		Histograms: hist.NewSet(), Partial: true, OnAgentLoss: pl.OnAgentLoss.String(),
		CoordinatorLost: how, AgentCount: rc.agents,
	}
	var total measure.Counts
	for i, pt := range rc.points {
		iv, err := wire.IntervalFromProto(pt)
		if err != nil {
			return nil, fmt.Errorf("run %s interval %d: %w", rc.runID, pt.GetIndex(), err)
		}
		if iv.Latency != nil {
			if err := run.Histograms.Latency.Merge(iv.Latency); err != nil {
				return nil, fmt.Errorf("run %s interval %d: %w", rc.runID, pt.GetIndex(), err)
			}
		}
		c, err := wire.CountsFromProto(rc.counts[i])
		if err != nil {
			return nil, fmt.Errorf("run %s interval %d: %w", rc.runID, pt.GetIndex(), err)
		}
		total.Add(&c)
		run.Timeline = append(run.Timeline, iv)
		run.Window = max(run.Window, iv.Start+iv.Length)
	}
	total.Issued = total.Ended()
	run.Counts = total
	for _, l := range rc.lost {
		run.LostAgents = append(run.LostAgents, report.LostAgent{Name: l.GetAgent(), Error: l.GetError(), LostAtS: l.GetAt().AsDuration().Seconds()})
	}
	return run, nil
}

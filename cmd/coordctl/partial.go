package main

import (
	"time"

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
// losing the coordinator (how says so): wire.RunFromReceived, then
// report.Build.
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
	return wire.RunFromReceived(&wire.Received{RunID: rc.runID, Plan: p, Agents: rc.agents, StartedAt: rc.firstEnd,
		Points: rc.points, Counts: rc.counts, Lost: rc.lost}, how)
}

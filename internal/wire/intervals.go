package wire

import (
	"fmt"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Received is what is known of a run without its result: the merged
// intervals as the coordinator's Progress messages carried them (points
// with their latency histograms, and counters), and the losses reported.
// coordctl builds it after losing the coordinator; the run store holds it
// for a run its coordinator did not finish.
type Received struct {
	RunID     string
	Plan      *pb.Plan
	Agents    int
	StartedAt time.Time
	Points    []*pb.TimelinePoint
	Counts    []*pb.Counters // one per point, in the same order
	Lost      []*pb.AgentLost
}

// ReportFromReceived builds the partial report of rc, marked with how
// (why there is no result): counters and latency from the merged
// intervals, the window to the end of the last one (never longer than the
// load received), no phase histograms, warm-up or agent rows, and in
// flight unknown (0: issued counts the requests that ended). Errors: a
// corrupt histogram or counters, naming the run and interval.
func ReportFromReceived(rc *Received, how string) (*report.Report, error) {
	run, err := RunFromReceived(rc, how)
	if err != nil {
		return nil, err
	}
	return report.Build(run)
}

// RunFromReceived is ReportFromReceived's run, before report.Build.
func RunFromReceived(rc *Received, how string) (*report.Run, error) {
	pl := PlanFromProto(rc.Plan)
	run := &report.Run{
		ID: rc.RunID, Target: pl.URL, Load: pl.Load, PacingWindow: pl.PacingWindow, PacingSpin: pl.PacingSpin, Connections: int64(pl.Connections),
		PlanDuration: pl.Duration, PlanRequests: pl.Requests, StartedAt: rc.StartedAt,
		Histograms: hist.NewSet(), Partial: true, OnAgentLoss: pl.OnAgentLoss.String(),
		CoordinatorLost: how, AgentCount: rc.Agents,
	}
	var total measure.Counts
	var dec intervalDecoder
	var latency hist.Accumulator
	for i, pt := range rc.Points {
		iv, err := dec.interval(pt)
		if err != nil {
			return nil, fmt.Errorf("run %s interval %d: %w", rc.RunID, pt.GetIndex(), err)
		}
		if err := iv.Sparse(&dec.dec, hist.Latency, &dec.s); err != nil {
			return nil, fmt.Errorf("run %s interval %d: %w", rc.RunID, pt.GetIndex(), err)
		}
		latency.Add(&dec.s)
		var c measure.Counts
		if i < len(rc.Counts) {
			if c, err = CountsFromProto(rc.Counts[i]); err != nil {
				return nil, fmt.Errorf("run %s interval %d: %w", rc.RunID, pt.GetIndex(), err)
			}
		}
		total.Add(&c)
		run.Timeline = append(run.Timeline, iv)
		run.Window = max(run.Window, iv.Start+iv.Length)
	}
	run.Histograms.Latency = latency.Histogram()
	total.Issued = total.Ended()
	run.Counts = total
	for _, l := range rc.Lost {
		run.LostAgents = append(run.LostAgents, report.LostAgent{Name: l.GetAgent(), Error: l.GetError(), LostAtS: l.GetAt().AsDuration().Seconds()})
	}
	return run, nil
}

// ReportFromStored builds the report of a stored run: RunFromStored,
// then report.Build.
func ReportFromStored(r *pb.StoredRun) (*report.Report, error) {
	run, err := RunFromStored(r)
	if err != nil {
		return nil, err
	}
	return report.Build(run)
}

// RunFromStored decodes a stored run for the report: from its result when
// it has one, else (a run its coordinator did not finish, or one that
// failed after some intervals) from its intervals (RunFromReceived),
// saying why it has no result. Either carries the run's tags, note and
// search ID. Errors: a run with neither a result nor an interval (its
// error says why), and decoding errors.
func RunFromStored(r *pb.StoredRun) (*report.Run, error) {
	var run *report.Run
	var err error
	if res := r.GetResult(); res != nil {
		run, err = RunFromProto(res)
	} else {
		if len(r.GetIntervals()) == 0 {
			why := r.GetError()
			if why == "" {
				why = "nothing was measured"
			}
			return nil, fmt.Errorf("run %s (%s) has no result and no interval: %s", r.GetRunId(), StateText(r.GetState()), why)
		}
		rc := &Received{RunID: r.GetRunId(), Plan: r.GetPlan(), Agents: len(r.GetAgents()), StartedAt: time.Unix(0, r.GetAcceptedAtUnixNano())}
		for _, pr := range r.GetIntervals() {
			rc.Points = append(rc.Points, pr.GetPoint())
			rc.Counts = append(rc.Counts, pr.GetCounters())
		}
		how := StateText(r.GetState())
		if e := r.GetError(); e != "" {
			how += ": " + e
		}
		run, err = RunFromReceived(rc, how)
	}
	if err != nil {
		return nil, err
	}
	run.Labels = report.Labels{Tags: r.GetTags(), Note: r.GetNote(), SearchID: r.GetSearchId()}
	return run, nil
}

// StateText names a stored run's state as listings show it: running,
// finished, failed, not finished.
func StateText(s pb.RunState) string {
	switch s {
	case pb.RunState_RUN_STATE_RUNNING:
		return "running"
	case pb.RunState_RUN_STATE_FINISHED:
		return "finished"
	case pb.RunState_RUN_STATE_FAILED:
		return "failed"
	case pb.RunState_RUN_STATE_NOT_FINISHED:
		return "not finished"
	}
	return "unknown"
}

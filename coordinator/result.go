package coordinator

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/version"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// result builds the run's merged result: the merge's histograms, timeline
// and stages, each agent's row (a lost one's with when and how), the
// window (merge.Window over every agent's end, a lost agent's being its
// last interval's) and the stages cut to it when it is shorter than
// planned, the loss marks (Partial, Aborted), and the skews in the
// coordinator's clock.
func (rn *run) result() (*pb.RunResult, error) {
	runID, p, startAt, runs, m := rn.id, rn.p, rn.startAt, rn.agents, rn.m
	res := &pb.RunResult{
		RunId:             runID,
		Plan:              storedPlan(p), // no secret in what is kept
		StartedAtUnixNano: startAt.UnixNano(),
		Window:            durationpb.New(p.Duration),
	}
	hash, err := planHash(p)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "hash plan: %v", err)
	}
	res.PlanHash = hash
	res.CoordinatorVersion, res.CoordinatorCommit = version.Version, version.Commit
	var total, warmup measure.Counts
	hs, err := wire.HistogramsToProto(m.Total())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode merged histograms: %v", err)
	}
	res.Histograms = hs
	tl, err := m.Timeline()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode interval histograms: %v", err)
	}
	res.Timeline = wire.TimelineToProto(tl)
	if p.Warmup > 0 {
		res.WarmupDuration = durationpb.New(p.Warmup)
	}
	var ends []time.Duration // each agent's window end, from its window start
	var firsts spread        // the agents' first sends, coordinator clock
	var mix []report.MixRun  // each request of the mix apart, over the agents' Done
	stopped := false         // an agent's window was ended early (StopRun, or an abort)
	for _, r := range runs {
		ar := rn.agentRow(r)
		total.Add(&r.counters)
		total.Issued += ar.Issued
		res.InFlight += ar.InFlight
		res.Agents = append(res.Agents, ar)
		if ar.StartOffset != nil { // from its Done, or a lost agent's intervals
			firsts.add(rn.startAt.Add(ar.StartOffset.AsDuration()))
		}
		if r.lost {
			// Its load ran, as far as the result holds it, to the end of
			// its last interval received: never claim more.
			res.Partial = true
			if r.intervals > 0 {
				ends = append(ends, r.lastEnd)
			}
		}
		d := r.done
		if d == nil {
			continue
		}
		// The agent's window, in its own clock: from its start instant
		// plus the warm-up to its reported end.
		if we := d.GetWindowEndUnixNano(); we != 0 {
			end := time.Unix(0, we).Sub(startAt.Add(r.offset + p.Warmup))
			ends = append(ends, end)
			if !r.lost {
				ar.Ran = durationpb.New(max(end, 0)) // its own window: its row's rates are over it
			}
		}
		if d.GetStopped() {
			stopped = true
		}
		w, err := wire.CountsFromProto(d.GetWarmup())
		if err != nil && ar.Error == "" {
			ar.Error = fmt.Sprintf("agent %s: warm-up %v", r.meta.GetName(), err)
		}
		warmup.Add(&w)
		if ms := d.GetMaxStreams(); ms > 0 && (res.MaxStreams == 0 || ms < res.MaxStreams) {
			res.MaxStreams = ms
		}
		if len(d.GetMix()) > 0 && len(d.GetMix()) == len(p.Mix) {
			// Each request of the mix apart: summed exactly, as the totals.
			// A malformed one is left out of the mix (mix_agents says
			// so), never out of the totals.
			am, err := wire.MixFromProto(d.GetMix())
			if err == nil {
				if mix, err = wire.MergeMix(mix, am); err == nil {
					res.MixAgents++
				}
			}
			if err != nil {
				rn.log.Warn("agent's per-request mix results left out", "agent", r.meta.GetName(), "err", err)
			}
		}
	}
	if res.Mix, err = wire.MixToProto(mix); err != nil {
		return nil, status.Errorf(codes.Internal, "encode mix histograms: %v", err)
	}
	res.Counters = wire.CountsToProto(&total)
	res.Warmup = wire.CountsToProto(&warmup)
	if w, ok := firsts.width(); ok {
		res.StartSkew = durationpb.New(w)
	}
	res.StoppedEarly = stopped && rn.userStop && rn.abort.by == ""
	if rn.abort.by != "" {
		res.AbortedByThreshold, res.AbortedAt = rn.abort.by, durationpb.New(rn.abort.at)
	}
	res.Aborted = rn.aborted
	if rn.stall > 0 {
		res.CoordinatorStall = durationpb.New(rn.stall)
	}
	window := merge.Window(p.Duration, ends, stopped || res.Partial)
	res.Window = durationpb.New(window)
	if window < p.Duration || res.StoppedEarly {
		// Stages cut by the stop report the part that ran, so that their
		// rates are over the time they had; later stages are empty.
		merge.Cut(m.Stages(), window)
	}
	if res.Stages, err = wire.StagesToProto(m.Stages()); err != nil {
		return nil, status.Errorf(codes.Internal, "encode stage histograms: %v", err)
	}
	res.Thresholds = rn.evalThresholds(&total, window)
	// Stage change skew: when each agent began sending on stage i's
	// schedule, in the coordinator's clock.
	for i := 1; i < len(res.Stages); i++ {
		var changes spread
		for _, r := range runs {
			ch := r.done.GetStageChangeUnixNano()
			if r.done == nil || i-1 >= len(ch) || ch[i-1] == 0 {
				continue
			}
			changes.add(time.Unix(0, ch[i-1]).Add(-r.offset))
		}
		if w, ok := changes.width(); ok {
			res.Stages[i].ChangeSkew = durationpb.New(w)
		}
	}
	return res, nil
}

// agentRow is agent r's row of the result: its counters, CPU, clock, and
// from its Done its in-flight and issued requests and its first send's
// offset from the start instant; without a Done (it failed mid-run) its
// issued requests are those whose outcome it reported (any still in
// flight are unknown) and Error says why.
func (rn *run) agentRow(r *agentRun) *pb.AgentResult {
	// The row's connections are the share's part of -c, or at a connection
	// rate (where -c opens nothing) its part of --max-open, the cap the
	// report's header names.
	conns := r.share.Connections
	if r.share.Plan.ConnectionRate {
		conns = r.share.MaxConnections
	}
	ar := &pb.AgentResult{
		Name:        r.meta.GetName(),
		GrpcAddr:    r.meta.GetGrpcAddr(),
		Connections: int64(conns),
		Requests:    r.counters.Requests,
		Errors:      r.counters.ErrorTotal(),
		CpuTime:     durationpb.New(r.cpu),
		CpuWait:     durationpb.New(r.cpuWait),
		Cpus:        r.cpus,
		ClockOffset: durationpb.New(r.offset),
		Rtt:         durationpb.New(r.rtt),
		CpuList:     r.ready.GetCpuList(),
		Missed:      r.counters.Missed,
		ClientLate:  r.counters.ClientLate,
		Rate:        r.share.Rate,
		Lost:        r.lost,
		Provenance:  r.ready.GetProvenance(),
		Intervals:   sortedIntervals(r.kept),
		IntervalRps: r.intervalRPS,
	}
	if r.lost {
		ar.LostAt = durationpb.New(r.lostAt)
		ar.Ran = durationpb.New(r.lastEnd)
	}
	if r.err != nil {
		ar.Error = r.err.Error()
	}
	fs := r.firstSend // an agent lost before Done: its intervals' first send
	d := r.done
	if d == nil {
		ar.Issued = r.counters.Ended()
	} else {
		ar.InFlight = d.GetInFlight()
		ar.Issued = d.GetIssued()
		fs = d.GetFirstSendUnixNano()
	}
	if fs != 0 {
		first := time.Unix(0, fs).Add(-r.offset) // in the coordinator's clock
		ar.StartOffset = durationpb.New(first.Sub(rn.startAt))
	}
	return ar
}

// spread is the earliest and latest of a set of instants.
type spread struct{ lo, hi time.Time }

func (s *spread) add(t time.Time) {
	if s.lo.IsZero() || t.Before(s.lo) {
		s.lo = t
	}
	if t.After(s.hi) {
		s.hi = t
	}
}

// width returns latest minus earliest; false when no instant was added.
func (s *spread) width() (time.Duration, bool) {
	return s.hi.Sub(s.lo), !s.lo.IsZero()
}

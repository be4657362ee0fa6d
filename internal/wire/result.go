package wire

import (
	"fmt"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// RunFromProto decodes a coordinator's merged result into the report's
// model (the report itself imports no proto, hence no gRPC). The load
// model comes from the result's plan. Errors: a corrupt or missing
// histogram, or counters measure does not know, named with the run.
func RunFromProto(r *pb.RunResult) (*report.Run, error) {
	fail := func(what string, err error) (*report.Run, error) {
		return nil, fmt.Errorf("run %s%s: %w", r.GetRunId(), what, err)
	}
	hs, err := HistogramsFromProto(r.GetHistograms())
	if err != nil {
		return fail("", err)
	}
	counts, err := CountsFromProto(r.GetCounters())
	if err != nil {
		return fail("", err)
	}
	warmup, err := CountsFromProto(r.GetWarmup())
	if err != nil {
		return fail(" warm-up", err)
	}
	p := PlanFromProto(r.GetPlan())
	run := &report.Run{
		ID: r.GetRunId(), Target: p.URL, Load: p.Load, ConnectionRate: p.ConnectionRate, RequestsPerConnection: p.RequestsPerConnection, ResumeRatio: p.TLS.ResumeRatio, CloseReset: p.CloseReset, PacingWindow: p.PacingWindow, PacingSpin: p.PacingSpin,
		Connections: int64(p.Connections), PlanDuration: p.Duration, PlanRequests: p.Requests,
		MaxOpen:   maxOpen(p),
		StartedAt: time.Unix(0, r.GetStartedAtUnixNano()), Window: r.GetWindow().AsDuration(), StoppedEarly: r.GetStoppedEarly(),
		Partial: r.GetPartial(), Aborted: r.GetAborted(), OnAgentLoss: p.OnAgentLoss.String(), CoordinatorStall: r.GetCoordinatorStall().AsDuration(),
		Histograms: hs, Counts: counts, InFlight: r.GetInFlight(), StartSkew: r.GetStartSkew().AsDuration(),
		StartSkewUnknown: startSkewUnknown(r.GetStartSkew() != nil, r.GetAgents()),
		Warmup:           warmup, WarmupDuration: r.GetWarmupDuration().AsDuration(), MaxStreams: r.GetMaxStreams(),
		HTTP3: p.Protocol == plan.H3,
	}
	run.Verdict = VerdictFromProto(r)
	var dec intervalDecoder
	run.Timeline = make([]report.Interval, 0, len(r.GetTimeline()))
	for _, pt := range r.GetTimeline() {
		iv, err := dec.interval(pt)
		if err != nil {
			return fail(fmt.Sprintf(" interval %d", pt.GetIndex()), err)
		}
		run.Timeline = append(run.Timeline, iv)
	}
	for _, st := range r.GetStages() {
		h, err := hist.Decode(st.GetLatency())
		if err != nil {
			return fail(fmt.Sprintf(" stage %d", st.GetIndex()), err)
		}
		c, err := CountsFromProto(st.GetCounters())
		if err != nil {
			return fail(fmt.Sprintf(" stage %d", st.GetIndex()), err)
		}
		run.Stages = append(run.Stages, report.StageRun{
			Index: st.GetIndex(), Start: st.GetStart().AsDuration(), Duration: st.GetDuration().AsDuration(),
			TargetFrom: st.GetTargetFrom(), TargetTo: st.GetTargetTo(), Counts: c, Latency: h,
			ChangeSkew: st.GetChangeSkew().AsDuration(),
		})
	}
	run.Provenance = report.RunProvenance{PlanHash: r.GetPlanHash(), CoordinatorVersion: r.GetCoordinatorVersion(), CoordinatorCommit: r.GetCoordinatorCommit()}
	for _, a := range r.GetAgents() {
		ar := report.AgentRun{
			Name: a.GetName(), Connections: a.GetConnections(), Requests: a.GetRequests(), Errors: a.GetErrors(),
			InFlight: a.GetInFlight(), Missed: a.GetMissed(), ClientLate: a.GetClientLate(), CPUTime: a.GetCpuTime().AsDuration(), CPUs: a.GetCpus(),
			CPUWait: a.GetCpuWait().AsDuration(), CPUList: a.GetCpuList(), ClockOffset: a.GetClockOffset().AsDuration(), RTT: a.GetRtt().AsDuration(),
			StartOffset: a.GetStartOffset().AsDuration(), StartOffsetUnknown: a.GetStartOffset() == nil, Error: a.GetError(),
			IntervalRPS: a.GetIntervalRps(),
			Rate:        a.GetRate(), Lost: a.GetLost(), LostAt: a.GetLostAt().AsDuration(), Ran: a.GetRan().AsDuration(),
			Provenance: ProvenanceFromProto(a.GetProvenance()),
		}
		if ar.Intervals, err = dec.agentIntervals(a.GetIntervals()); err != nil {
			return fail(" agent "+a.GetName(), err)
		}
		run.Agents = append(run.Agents, ar)
	}
	mix, err := MixFromProto(r.GetMix())
	if err != nil {
		return fail("", err)
	}
	run.Mix, run.MixAgents, run.Requests = mix, int(r.GetMixAgents()), p.Mix
	return run, nil
}

// startSkewUnknown reports whether a result's start skew says nothing:
// none came, or it covers fewer than two agents of several (the others
// failed before their first send was known), where its 0 would claim a
// perfect start.
func startSkewUnknown(has bool, agents []*pb.AgentResult) bool {
	known := 0
	for _, a := range agents {
		if a.GetStartOffset() != nil {
			known++
		}
	}
	return len(agents) > 0 && (!has || (len(agents) > 1 && known < 2))
}

// IntervalFromProto decodes one timeline point. Its histograms stay
// encoded (report.Interval.V2: the bytes of pt, not a copy), each checked
// by decoding it into sparse form. Errors: a corrupt histogram, named with
// its kind.
func IntervalFromProto(pt *pb.TimelinePoint) (report.Interval, error) {
	var dec intervalDecoder
	return dec.interval(pt)
}

// intervalDecoder checks the histograms of many intervals with one
// decoder; s holds the last one decoded.
type intervalDecoder struct {
	dec hist.Decoder
	s   hist.Sparse
}

// pointKinds are the histograms a TimelinePoint carries.
var pointKinds = []hist.Kind{hist.Latency, hist.Service, hist.Lateness, hist.Connect, hist.TLSFull, hist.TLSResumed, hist.TTFB}

func (d *intervalDecoder) interval(pt *pb.TimelinePoint) (report.Interval, error) {
	iv := report.Interval{
		Index: pt.GetIndex(), Start: pt.GetStart().AsDuration(), Length: pt.GetLength().AsDuration(),
		Requests: pt.GetRequests(), Errors: pt.GetErrors(), Missed: pt.GetMissed(), TargetRPS: pt.GetTargetRps(),
		TargetConnections: pt.GetTargetConnections(), Agents: pt.GetAgents(), Partial: pt.GetPartial(),
		CPUBusy: pt.GetCpuBusy(), Connections: pt.GetConnections(), AgentConnections: pt.GetAgentConnections(), GrowthRefused: pt.GetGrowthRefused(),
		Backlogged: pt.GetBacklogged(),
	}
	for _, k := range pointKinds {
		b := PointHistogramBytes(pt, k)
		if len(b) == 0 {
			continue
		}
		if err := d.dec.Decode(b, &d.s); err != nil {
			return iv, fmt.Errorf("%s histogram: %w", k, err)
		}
		iv.V2[k] = b
	}
	return iv, nil
}

// PointHistogramBytes returns the timeline point's histogram of kind k
// (nil for a kind it does not carry).
func PointHistogramBytes(pt *pb.TimelinePoint, k hist.Kind) []byte {
	switch k {
	case hist.Latency:
		return pt.GetLatency()
	case hist.Service:
		return pt.GetServiceTime()
	case hist.Lateness:
		return pt.GetLateness()
	case hist.Connect:
		return pt.GetConnect()
	case hist.TLSFull:
		return pt.GetTlsFull()
	case hist.TLSResumed:
		return pt.GetTlsResumed()
	case hist.TTFB:
		return pt.GetTtfb()
	}
	return nil
}

// ReportFromResult builds the report of a merged result: RunFromProto,
// then report.Build.
func ReportFromResult(r *pb.RunResult) (*report.Report, error) {
	run, err := RunFromProto(r)
	if err != nil {
		return nil, err
	}
	return report.Build(run)
}

// maxOpen is a connection-rate plan's cap on connections open at once
// (report.Run.MaxOpen), 0 for any other plan.
func maxOpen(p plan.Plan) int64 {
	if !p.ConnectionRate {
		return 0
	}
	return int64(p.MaxConnections)
}

package wire

import (
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/merge"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TimelineToProto converts the merged timeline; each point carries its
// merged latency, phase (those measured in it) and, in open loop,
// service-time and send-lateness histograms, never percentiles.
func TimelineToProto(tl []*merge.Point) []*pb.TimelinePoint {
	out := make([]*pb.TimelinePoint, 0, len(tl))
	for _, pt := range tl {
		out = append(out, PointToProto(pt))
	}
	return out
}

// PointToProto converts one merged timeline point (as Progress carries
// it).
func PointToProto(pt *merge.Point) *pb.TimelinePoint {
	return &pb.TimelinePoint{
		Index: int32(pt.Index), Start: durationpb.New(pt.Start), Length: durationpb.New(pt.Length),
		Requests: pt.Requests, Errors: pt.Errors, Missed: pt.Missed, CpuBusy: pt.CPUBusy,
		TargetRps: pt.TargetRPS, TargetConnections: pt.TargetConnections, Latency: pt.Latency, Lateness: pt.Lateness, ServiceTime: pt.Service,
		Agents: int32(pt.Agents), Partial: pt.Partial, Connections: pt.Connections, AgentConnections: pt.AgentConnections,
		GrowthRefused: pt.GrowthRefused, Backlogged: pt.Backlogged,
		Connect: pt.Phases[hist.Connect], TlsFull: pt.Phases[hist.TLSFull], TlsResumed: pt.Phases[hist.TLSResumed], Ttfb: pt.Phases[hist.TTFB],
	}
}

// StagesToProto converts the merged stages (latency V2 compressed).
func StagesToProto(stages []*merge.Stage) ([]*pb.StageResult, error) {
	var out []*pb.StageResult
	for _, st := range stages {
		b, err := st.Latency.Encode()
		if err != nil {
			return nil, err
		}
		out = append(out, &pb.StageResult{
			Index: int32(st.Index), Start: durationpb.New(st.Start), Duration: durationpb.New(st.Duration),
			TargetFrom: st.From, TargetTo: st.To, Counters: CountsToProto(&st.Counts), Latency: b,
		})
	}
	return out, nil
}

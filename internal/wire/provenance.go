package wire

import (
	"fmt"

	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// ProvenanceFromProto converts an agent's provenance (nil for none).
func ProvenanceFromProto(p *pb.Provenance) *report.AgentProvenance {
	if p == nil {
		return nil
	}
	return &report.AgentProvenance{
		Hostname: p.GetHostname(), Kernel: p.GetKernel(), CPUModel: p.GetCpuModel(), CPUCount: p.GetCpuCount(),
		GoVersion: p.GetGoVersion(), OSArch: p.GetOsArch(), TLSLibrary: p.GetTlsLibrary(), TLSLibraryVersion: p.GetTlsLibraryVersion(),
		AgentVersion: p.GetAgentVersion(), AgentCommit: p.GetAgentCommit(),
	}
}

// AgentIntervalsFromProto decodes an agent's kept intervals, latency
// histograms included (V2, compressed or not). Errors: a corrupt or
// foreign-geometry histogram, or one whose sample count is not the
// interval's requests, naming the interval.
func AgentIntervalsFromProto(ivs []*pb.AgentInterval) ([]report.AgentInterval, error) {
	var dec intervalDecoder
	return dec.agentIntervals(ivs)
}

func (d *intervalDecoder) agentIntervals(ivs []*pb.AgentInterval) ([]report.AgentInterval, error) {
	if len(ivs) == 0 {
		return nil, nil
	}
	out := make([]report.AgentInterval, 0, len(ivs))
	for _, iv := range ivs {
		if err := d.dec.Decode(iv.GetLatency(), &d.s); err != nil {
			return nil, fmt.Errorf("interval %d: %w", iv.GetIndex(), err)
		}
		if d.s.Total != iv.GetRequests() {
			return nil, fmt.Errorf("interval %d: latency histogram holds %d samples, counters say %d requests", iv.GetIndex(), d.s.Total, iv.GetRequests())
		}
		out = append(out, report.AgentInterval{
			Index: iv.GetIndex(), Start: iv.GetStart().AsDuration(), Length: iv.GetLength().AsDuration(),
			Requests: iv.GetRequests(), Errors: iv.GetErrors(), Missed: iv.GetMissed(), CPUTime: iv.GetCpuTime().AsDuration(),
			LatencyV2: iv.GetLatency(),
		})
	}
	return out, nil
}

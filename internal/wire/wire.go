package wire

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/engine"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// PlanToProto converts a plan.
func PlanToProto(p plan.Plan) *pb.Plan {
	out := &pb.Plan{
		Url:         p.URL,
		Method:      p.Method,
		Body:        p.Body,
		Connections: int64(p.Connections),
		Duration:    dur(p.Duration),
		Timeout:     dur(p.Timeout),
		Interval:    dur(p.Interval),
		Agents:      int32(p.Agents),
		Tls:         &pb.TLSOptions{Insecure: p.TLS.Insecure, CaPem: p.TLS.CAPEM, ServerName: p.TLS.ServerName},
	}
	for _, h := range p.Headers {
		out.Headers = append(out.Headers, &pb.Header{Name: h.Name, Value: h.Value})
	}
	return out
}

// PlanFromProto converts a plan; a nil message gives the zero plan.
func PlanFromProto(m *pb.Plan) plan.Plan {
	p := plan.Plan{
		URL:         m.GetUrl(),
		Method:      m.GetMethod(),
		Body:        m.GetBody(),
		Connections: int(m.GetConnections()),
		Duration:    m.GetDuration().AsDuration(),
		Timeout:     m.GetTimeout().AsDuration(),
		Interval:    m.GetInterval().AsDuration(),
		Agents:      int(m.GetAgents()),
		TLS: plan.TLS{
			Insecure:   m.GetTls().GetInsecure(),
			CAPEM:      m.GetTls().GetCaPem(),
			ServerName: m.GetTls().GetServerName(),
		},
	}
	for _, h := range m.GetHeaders() {
		p.Headers = append(p.Headers, plan.Header{Name: h.GetName(), Value: h.GetValue()})
	}
	return p
}

// ShareToProto converts a share.
func ShareToProto(s plan.Share) *pb.Share {
	return &pb.Share{RunId: s.RunID, Plan: PlanToProto(s.Plan), Index: int32(s.Index), Count: int32(s.Count), Connections: int64(s.Connections)}
}

// ShareFromProto converts a share.
func ShareFromProto(m *pb.Share) plan.Share {
	return plan.Share{RunID: m.GetRunId(), Plan: PlanFromProto(m.GetPlan()), Index: int(m.GetIndex()), Count: int(m.GetCount()), Connections: int(m.GetConnections())}
}

// CountsToProto converts engine counts; issued is carried separately by the
// engine and set by the caller where known.
func CountsToProto(c *engine.Counts) *pb.Counters {
	out := &pb.Counters{Requests: c.Requests, BytesRead: c.BytesRead}
	for code, n := range c.StatusMap() {
		if out.Status == nil {
			out.Status = map[int32]int64{}
		}
		out.Status[int32(code)] = n
	}
	for kind, n := range c.ErrorMap() {
		if out.Errors == nil {
			out.Errors = map[string]int64{}
		}
		out.Errors[kind] = n
	}
	return out
}

// AddCounters adds src to dst (dst's maps are created as needed).
func AddCounters(dst, src *pb.Counters) {
	dst.Issued += src.GetIssued()
	dst.Requests += src.GetRequests()
	dst.BytesRead += src.GetBytesRead()
	for k, v := range src.GetStatus() {
		if dst.Status == nil {
			dst.Status = map[int32]int64{}
		}
		dst.Status[k] += v
	}
	for k, v := range src.GetErrors() {
		if dst.Errors == nil {
			dst.Errors = map[string]int64{}
		}
		dst.Errors[k] += v
	}
}

// ErrorTotal returns the number of failed requests in c.
func ErrorTotal(c *pb.Counters) int64 {
	var n int64
	for _, v := range c.GetErrors() {
		n += v
	}
	return n
}

func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

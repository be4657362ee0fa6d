package wire

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// PlanToProto converts a plan.
func PlanToProto(p plan.Plan) *pb.Plan {
	out := &pb.Plan{
		Url:                   p.URL,
		Method:                p.Method,
		Body:                  p.Body,
		Connections:           int64(p.Connections),
		Duration:              dur(p.Duration),
		Timeout:               dur(p.Timeout),
		Interval:              dur(p.Interval),
		Agents:                int32(p.Agents),
		Requests:              p.Requests,
		Warmup:                dur(p.Warmup),
		NoKeepalive:           p.NoKeepAlive,
		ConnectionRate:        p.ConnectionRate,
		RequestsPerConnection: int32(p.RequestsPerConnection),
		CloseReset:            p.CloseReset,
		MaxRedirects:          int32(p.MaxRedirects),
		SourceIps:             p.SourceIPs,
		Protocol:              protocolToProto(p.Protocol),
		MaxStreams:            int32(p.MaxStreams),
		ConnectTo:             p.ConnectTo,
		Resolver:              p.Resolver,
		Headers:               headersToProto(p.Headers),
		MaxConnections:        int64(p.MaxConnections),
		OnAgentLoss:           lossToProto(p.OnAgentLoss),
		Tls: &pb.TLSOptions{
			Insecure: p.TLS.Insecure, CaPem: p.TLS.CAPEM, CaFile: p.TLS.CAFile, ServerName: p.TLS.ServerName,
			CertPem: p.TLS.CertPEM, KeyPem: p.TLS.KeyPEM,
			MinVersion: p.TLS.MinVersion, MaxVersion: p.TLS.MaxVersion,
			Ciphers: p.TLS.Ciphers, Curves: p.TLS.Curves, Alpn: p.TLS.ALPN, Resume: p.TLS.Resume, ResumeRatio: p.TLS.ResumeRatio, EarlyData: p.TLS.EarlyData,
		},
	}
	var stages []*pb.Stage
	for i, st := range p.Stages {
		stages = append(stages, &pb.Stage{Duration: dur(st.Duration), Target: p.StageTarget(i)})
	}
	switch p.Load {
	case plan.OpenLoop:
		out.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: p.Rate, Stages: stages, PacingWindow: dur(p.PacingWindow), PacingSpin: p.PacingSpin}}
	default:
		if stages != nil {
			out.Load = &pb.Plan_ClosedLoop{ClosedLoop: &pb.ClosedLoop{Stages: stages}}
		}
	}
	for _, r := range p.Mix {
		out.Mix = append(out.Mix, &pb.Request{Method: r.Method, Url: r.URL, Headers: headersToProto(r.Headers), Body: r.Body, Weight: int32(r.Weight)})
	}
	return out
}

func headersToProto(hs []plan.Header) []*pb.Header {
	var out []*pb.Header
	for _, h := range hs {
		out = append(out, &pb.Header{Name: h.Name, Value: h.Value})
	}
	return out
}

func headersFromProto(hs []*pb.Header) []plan.Header {
	var out []plan.Header
	for _, h := range hs {
		out = append(out, plan.Header{Name: h.GetName(), Value: h.GetValue()})
	}
	return out
}

// PlanFromProto converts a plan; a nil message gives the zero plan.
func PlanFromProto(m *pb.Plan) plan.Plan {
	p := plan.Plan{
		URL:                   m.GetUrl(),
		Method:                m.GetMethod(),
		Body:                  m.GetBody(),
		Connections:           int(m.GetConnections()),
		Duration:              m.GetDuration().AsDuration(),
		Timeout:               m.GetTimeout().AsDuration(),
		Interval:              m.GetInterval().AsDuration(),
		Agents:                int(m.GetAgents()),
		Requests:              m.GetRequests(),
		Warmup:                m.GetWarmup().AsDuration(),
		NoKeepAlive:           m.GetNoKeepalive(),
		ConnectionRate:        m.GetConnectionRate(),
		RequestsPerConnection: int(m.GetRequestsPerConnection()),
		CloseReset:            m.GetCloseReset(),
		MaxRedirects:          int(m.GetMaxRedirects()),
		SourceIPs:             m.GetSourceIps(),
		Protocol:              protocolFromProto(m.GetProtocol()),
		MaxStreams:            int(m.GetMaxStreams()),
		ConnectTo:             m.GetConnectTo(),
		Resolver:              m.GetResolver(),
		Headers:               headersFromProto(m.GetHeaders()),
		MaxConnections:        int(m.GetMaxConnections()),
		OnAgentLoss:           lossFromProto(m.GetOnAgentLoss()),
		TLS: plan.TLS{
			Insecure:    m.GetTls().GetInsecure(),
			CAPEM:       m.GetTls().GetCaPem(),
			CAFile:      m.GetTls().GetCaFile(),
			ServerName:  m.GetTls().GetServerName(),
			CertPEM:     m.GetTls().GetCertPem(),
			KeyPEM:      m.GetTls().GetKeyPem(),
			MinVersion:  m.GetTls().GetMinVersion(),
			MaxVersion:  m.GetTls().GetMaxVersion(),
			Ciphers:     m.GetTls().GetCiphers(),
			Curves:      m.GetTls().GetCurves(),
			ALPN:        m.GetTls().GetAlpn(),
			Resume:      m.GetTls().GetResume(),
			ResumeRatio: m.GetTls().GetResumeRatio(),
			EarlyData:   m.GetTls().GetEarlyData(),
		},
	}
	stages := m.GetClosedLoop().GetStages()
	if ol := m.GetOpenLoop(); ol != nil {
		p.Load, p.Rate, stages = plan.OpenLoop, ol.GetRate(), ol.GetStages()
		p.PacingWindow = ol.GetPacingWindow().AsDuration()
		p.PacingSpin = ol.GetPacingSpin()
	}
	for _, st := range stages {
		s := plan.Stage{Duration: st.GetDuration().AsDuration()}
		if p.Load == plan.OpenLoop {
			s.Rate = st.GetTarget()
		} else {
			s.Connections = int(st.GetTarget())
		}
		p.Stages = append(p.Stages, s)
	}
	for _, r := range m.GetMix() {
		p.Mix = append(p.Mix, plan.Request{Method: r.GetMethod(), URL: r.GetUrl(), Headers: headersFromProto(r.GetHeaders()), Body: r.GetBody(), Weight: int(r.GetWeight())})
	}
	return p
}

func protocolToProto(p plan.Protocol) pb.Protocol {
	switch p {
	case plan.H1:
		return pb.Protocol_PROTOCOL_HTTP1
	case plan.H2:
		return pb.Protocol_PROTOCOL_HTTP2
	case plan.H3:
		return pb.Protocol_PROTOCOL_HTTP3
	}
	return pb.Protocol(-1) // rejected by the receiver's validation
}

// protocolFromProto maps unspecified to HTTP/1.1, and a value this build
// does not know to a plan.Protocol that Validate rejects.
func protocolFromProto(p pb.Protocol) plan.Protocol {
	switch p {
	case pb.Protocol_PROTOCOL_UNSPECIFIED, pb.Protocol_PROTOCOL_HTTP1:
		return plan.H1
	case pb.Protocol_PROTOCOL_HTTP2:
		return plan.H2
	case pb.Protocol_PROTOCOL_HTTP3:
		return plan.H3
	}
	return plan.Protocol(255)
}

func lossToProto(l plan.LossPolicy) pb.AgentLossPolicy {
	switch l {
	case plan.AbortOnLoss:
		return pb.AgentLossPolicy_AGENT_LOSS_POLICY_ABORT
	case plan.ContinueOnLoss:
		return pb.AgentLossPolicy_AGENT_LOSS_POLICY_CONTINUE
	}
	return pb.AgentLossPolicy(-1) // rejected by the receiver's validation
}

// lossFromProto maps unspecified to abort, and a value this build does
// not know to a plan.LossPolicy that Validate rejects.
func lossFromProto(l pb.AgentLossPolicy) plan.LossPolicy {
	switch l {
	case pb.AgentLossPolicy_AGENT_LOSS_POLICY_UNSPECIFIED, pb.AgentLossPolicy_AGENT_LOSS_POLICY_ABORT:
		return plan.AbortOnLoss
	case pb.AgentLossPolicy_AGENT_LOSS_POLICY_CONTINUE:
		return plan.ContinueOnLoss
	}
	return plan.LossPolicy(255)
}

// ShareToProto converts a share.
func ShareToProto(s plan.Share) *pb.Share {
	return &pb.Share{RunId: s.RunID, Plan: PlanToProto(s.Plan), Index: int32(s.Index), Count: int32(s.Count), Connections: int64(s.Connections), Requests: s.Requests,
		Rate: s.Rate, MaxConnections: int64(s.MaxConnections), StageTargets: s.StageTargets}
}

// ShareFromProto converts a share.
func ShareFromProto(m *pb.Share) plan.Share {
	return plan.Share{RunID: m.GetRunId(), Plan: PlanFromProto(m.GetPlan()), Index: int(m.GetIndex()), Count: int(m.GetCount()), Connections: int(m.GetConnections()), Requests: m.GetRequests(),
		Rate: m.GetRate(), MaxConnections: int(m.GetMaxConnections()), StageTargets: m.GetStageTargets()}
}

// CountsToProto converts counts (only non-zero status and error
// buckets travel).
func CountsToProto(c *measure.Counts) *pb.Counters {
	out := &pb.Counters{
		Issued: c.Issued, Requests: c.Requests, BytesRead: c.BytesRead,
		ConnectionsOpened: c.ConnectionsOpened, Reconnects: c.Reconnects, Retries: c.Retries, Redirects: c.Redirects,
		HandshakesFull: c.HandshakesFull, HandshakesResumed: c.HandshakesResumed, HandshakesRefused: c.HandshakesRefused,
		HandshakesEarlyOffered: c.HandshakesEarlyOffered, HandshakesEarlyAccepted: c.HandshakesEarlyAccepted,
		Missed: c.Missed, Unsent: c.Unsent, Backlogged: c.Backlogged, GrowthRefused: c.GrowthRefused, Queued: c.Queued, ClientLate: c.ClientLate, Carried: c.Carried, HeaderBytes: c.HeaderBytes, BodyBytes: c.BodyBytes, HeaderFieldBytes: c.HeaderFieldBytes,
	}
	for enc, n := range c.EncodingMap() {
		if out.ContentEncoding == nil {
			out.ContentEncoding = map[string]int64{}
		}
		out.ContentEncoding[enc] = n
	}
	for k, n := range c.TLS {
		if out.Tls == nil {
			out.Tls = map[string]int64{}
		}
		out.Tls[k] = n
	}
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

// MaxCount bounds every counter of one message from another machine
// (2^40, about 10^12: no interval, stage or run of one agent comes near),
// so that sums never overflow.
const MaxCount = 1 << 40

// Bounds of the TLS counters of one message: at most MaxTLSKeys keys,
// each "version:", "cipher:", "group:" or "alpn:" and a printable ASCII
// value of at most MaxTLSValue bytes (an ALPN protocol ID is at most 255,
// RFC 7301).
const (
	MaxTLSKeys  = 256
	MaxTLSValue = 255
)

// CountsFromProto converts counters from another machine (nil gives the
// zero counts), checking them: every counter in [0, MaxCount], a status
// code in [100, measure.MaxStatus) (a final status outside it is a
// protocol error, never a count), an error kind measure knows, TLS keys as
// the engine writes them (MaxTLSKeys, MaxTLSValue), and completed requests
// equal to the sum of their status codes. Errors name the counter.
func CountsFromProto(m *pb.Counters) (measure.Counts, error) {
	c := measure.Counts{
		Issued: m.GetIssued(), Requests: m.GetRequests(), BytesRead: m.GetBytesRead(),
		ConnectionsOpened: m.GetConnectionsOpened(), Reconnects: m.GetReconnects(), Retries: m.GetRetries(), Redirects: m.GetRedirects(),
		HandshakesFull: m.GetHandshakesFull(), HandshakesResumed: m.GetHandshakesResumed(), HandshakesRefused: m.GetHandshakesRefused(),
		HandshakesEarlyOffered: m.GetHandshakesEarlyOffered(), HandshakesEarlyAccepted: m.GetHandshakesEarlyAccepted(),
		Missed: m.GetMissed(), Unsent: m.GetUnsent(), Backlogged: m.GetBacklogged(), GrowthRefused: m.GetGrowthRefused(), Queued: m.GetQueued(), ClientLate: m.GetClientLate(), Carried: m.GetCarried(), HeaderBytes: m.GetHeaderBytes(), BodyBytes: m.GetBodyBytes(), HeaderFieldBytes: m.GetHeaderFieldBytes(),
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"issued", c.Issued}, {"requests", c.Requests}, {"bytes_read", c.BytesRead},
		{"connections_opened", c.ConnectionsOpened}, {"reconnects", c.Reconnects}, {"retries", c.Retries}, {"redirects", c.Redirects},
		{"handshakes_full", c.HandshakesFull}, {"handshakes_resumed", c.HandshakesResumed}, {"handshakes_refused", c.HandshakesRefused},
		{"handshakes_early_offered", c.HandshakesEarlyOffered}, {"handshakes_early_accepted", c.HandshakesEarlyAccepted},
		{"missed", c.Missed}, {"unsent", c.Unsent}, {"backlogged", c.Backlogged}, {"growth_refused", c.GrowthRefused}, {"queued", c.Queued}, {"client_late", c.ClientLate}, {"carried", c.Carried}, {"header_bytes", c.HeaderBytes}, {"body_bytes", c.BodyBytes}, {"header_field_bytes", c.HeaderFieldBytes},
	} {
		if err := checkCount(f.name, f.v); err != nil {
			return measure.Counts{}, err
		}
	}
	if c.HandshakesRefused > c.HandshakesFull {
		return measure.Counts{}, fmt.Errorf("counters: handshakes_refused %d above handshakes_full %d: want a part of it", c.HandshakesRefused, c.HandshakesFull)
	}
	if c.HandshakesEarlyAccepted > c.HandshakesEarlyOffered || c.HandshakesEarlyAccepted > c.HandshakesResumed {
		return measure.Counts{}, fmt.Errorf("counters: handshakes_early_accepted %d above handshakes_early_offered %d or handshakes_resumed %d: want a part of both", c.HandshakesEarlyAccepted, c.HandshakesEarlyOffered, c.HandshakesResumed)
	}
	if c.Backlogged > c.Missed {
		return measure.Counts{}, fmt.Errorf("counters: backlogged %d above missed %d: want a part of it", c.Backlogged, c.Missed)
	}
	var statusSum int64
	for code, n := range m.GetStatus() {
		if code < 100 {
			return measure.Counts{}, fmt.Errorf("counters: status code %d outside [100, %d)", code, measure.MaxStatus)
		}
		if err := checkCount(fmt.Sprintf("status[%d]", code), n); err != nil {
			return measure.Counts{}, err
		}
		if err := c.AddStatus(int(code), n); err != nil {
			return measure.Counts{}, fmt.Errorf("counters: %w", err)
		}
		statusSum += n
	}
	if statusSum != c.Requests {
		return measure.Counts{}, fmt.Errorf("counters: %d requests, but their status codes sum to %d", c.Requests, statusSum)
	}
	for kind, n := range m.GetErrors() {
		if err := c.AddError(kind, n); err != nil {
			return measure.Counts{}, fmt.Errorf("counters: %w", err)
		}
		if err := checkCount("errors["+kind+"]", n); err != nil {
			return measure.Counts{}, err
		}
	}
	for name, n := range m.GetContentEncoding() {
		e, err := measure.ParseEncoding(name)
		if err != nil {
			return measure.Counts{}, fmt.Errorf("counters: %w", err)
		}
		if err := checkCount("content_encoding["+name+"]", n); err != nil {
			return measure.Counts{}, err
		}
		c.Encodings[e] = n
	}
	if len(m.GetTls()) > MaxTLSKeys {
		return measure.Counts{}, fmt.Errorf("counters: %d TLS keys: want at most %d", len(m.GetTls()), MaxTLSKeys)
	}
	for k, n := range m.GetTls() {
		if err := checkTLSKey(k); err != nil {
			return measure.Counts{}, err
		}
		if err := checkCount(fmt.Sprintf("tls[%q]", k), n); err != nil {
			return measure.Counts{}, err
		}
		if c.TLS == nil {
			c.TLS = map[string]int64{}
		}
		c.TLS[k] = n
	}
	return c, nil
}

func checkCount(name string, v int64) error {
	if v < 0 || v > MaxCount {
		return fmt.Errorf("counters: %s = %d: want 0 to %d", name, v, int64(MaxCount))
	}
	return nil
}

// checkTLSKey checks a TLS counter's key: "version:", "cipher:", "group:",
// "alpn:" or (QUIC) "transport:" and a printable ASCII value.
func checkTLSKey(k string) error {
	kind, v, _ := strings.Cut(k, ":")
	switch kind {
	case "version", "cipher", "group", "alpn", "transport":
	default:
		return fmt.Errorf("counters: TLS key %q: want a version, cipher, group, alpn or transport key (\"version:TLS 1.3\")", k)
	}
	if v == "" || len(v) > MaxTLSValue || strings.IndexFunc(v, func(r rune) bool { return r < ' ' || r > '~' }) >= 0 {
		return fmt.Errorf("counters: TLS key %q: want a value of 1 to %d printable ASCII bytes", k, MaxTLSValue)
	}
	return nil
}

func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// HistogramBytes returns the encoding of kind k's histogram in h (nil
// when absent): the one map from hist's kinds to the proto's fields.
func HistogramBytes(h *pb.Histograms, k hist.Kind) []byte {
	switch k {
	case hist.Latency:
		return h.GetLatency()
	case hist.Service:
		return h.GetServiceTime()
	case hist.Connect:
		return h.GetConnect()
	case hist.TLSFull:
		return h.GetTlsFull()
	case hist.TLSResumed:
		return h.GetTlsResumed()
	case hist.TTFB:
		return h.GetTtfb()
	case hist.Lateness:
		return h.GetLateness()
	case hist.OK:
		return h.GetOkLatency()
	case hist.HandshakeLatency:
		return h.GetHandshakeLatency()
	}
	return nil
}

func setHistogramBytes(h *pb.Histograms, k hist.Kind, b []byte) {
	switch k {
	case hist.Latency:
		h.Latency = b
	case hist.Service:
		h.ServiceTime = b
	case hist.Connect:
		h.Connect = b
	case hist.TLSFull:
		h.TlsFull = b
	case hist.TLSResumed:
		h.TlsResumed = b
	case hist.TTFB:
		h.Ttfb = b
	case hist.Lateness:
		h.Lateness = b
	case hist.OK:
		h.OkLatency = b
	case hist.HandshakeLatency:
		h.HandshakeLatency = b
	}
}

// IntervalHistogramsToProto encodes an interval's histograms for the agent
// link in HdrHistogram's uncompressed V2 encoding (hist.EncodeV2): the
// coordinator decodes a thousand agents' intervals each second, and
// inflating was half of that cost. Results keep HistogramsToProto's
// compressed form, which every HdrHistogram implementation reads.
func IntervalHistogramsToProto(s *hist.Set) *pb.Histograms {
	out := &pb.Histograms{}
	for k := range hist.NumKinds {
		setHistogramBytes(out, k, s.Get(k).EncodeV2())
	}
	return out
}

// HistogramsToProto encodes a histogram set (V2 compressed).
func HistogramsToProto(s *hist.Set) (*pb.Histograms, error) {
	out := &pb.Histograms{}
	for k := range hist.NumKinds {
		b, err := s.Get(k).Encode()
		if err != nil {
			return nil, err
		}
		setHistogramBytes(out, k, b)
	}
	return out, nil
}

// HistogramsFromProto decodes a result's histogram set (V2 compressed, as
// HistogramsToProto writes it; agents' uncompressed intervals go through
// hist.Decoder). An absent ok or handshake_latency histogram (a result
// recorded before it existed) is empty. Errors: a missing, corrupt or foreign-geometry
// histogram, named by kind.
func HistogramsFromProto(h *pb.Histograms) (*hist.Set, error) {
	out := &hist.Set{}
	for k := range hist.NumKinds {
		b := HistogramBytes(h, k)
		if (k == hist.OK || k == hist.HandshakeLatency) && len(b) == 0 {
			out.Put(k, hist.New())
			continue
		}
		d, err := hist.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s histogram: %w", k, err)
		}
		out.Put(k, d)
	}
	return out, nil
}

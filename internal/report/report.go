package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Report is one run's report. JSON field names are part of the interface
// (see README "The report").
type Report struct {
	RunID string `json:"run_id"`
	// Target is the plan's URL.
	Target string `json:"target"`
	// StartedAt is the start instant (coordinator clock), RFC 3339.
	StartedAt time.Time `json:"started_at"`
	// DurationS is the measurement window's length in seconds: the
	// planned one, or the shortened one when StoppedEarly (or when the
	// count ran out first).
	DurationS float64 `json:"duration_s"`
	// PlanDurationS is the plan's window (-d) in seconds; 0, and absent
	// from the JSON, in count mode without a duration.
	PlanDurationS float64 `json:"plan_duration_s,omitempty"`
	// PlanRequests is the plan's request count in count mode (-n); 0,
	// and absent from the JSON, in duration mode.
	PlanRequests int64 `json:"plan_requests,omitempty"`
	// StoppedEarly is set when the user ended the window before its
	// planned end (a graceful Ctrl-C in coordctl run, or StopRun): every
	// figure, RPS included, covers the shortened window of DurationS
	// seconds, from the start to the last request's end.
	StoppedEarly bool `json:"stopped_early"`
	// Agents and connections used.
	AgentCount  int   `json:"agent_count"`
	Connections int64 `json:"connections"`
	// Mode is "closed" (fixed concurrency, wrk) or "open" (a target rate,
	// wrk2's -R).
	Mode string `json:"mode"`
	// LatencyBasis says where latency starts: "actual send" (closed loop)
	// or "intended send" (open loop: no coordinated omission).
	LatencyBasis string `json:"latency_basis"`
	// TargetRPS is the open-loop target rate (0 in closed loop; with
	// stages, the window's mean target).
	TargetRPS float64 `json:"target_rps,omitempty"`
	// Missed counts open-loop sends that started more than 5 ms late
	// (engine.MissThreshold), or never before the window closed.
	Missed int64 `json:"missed"`
	// ServiceTimeUs summarizes open-loop latencies from the actual send
	// (wrk2's uncorrected histogram); null in closed loop.
	ServiceTimeUs *hist.Summary `json:"service_time_us"`
	// ClientBound is set when any agent's CPUs were over 90 % busy in the
	// window or an open-loop run missed more than 1 % of its sends: the
	// numbers may measure the client, not the server.
	ClientBound        bool     `json:"client_bound"`
	ClientBoundReasons []string `json:"client_bound_reasons,omitempty"`
	// Timeline has one point per interval, merged across agents.
	Timeline []TimelinePoint `json:"timeline"`
	// Stages has one entry per plan stage.
	Stages []Stage `json:"stages,omitempty"`
	// Issued = Requests + error total + InFlight.
	Issued int64 `json:"issued"`
	// Requests counts responses completed in the window (any status).
	Requests int64 `json:"requests"`
	// InFlight counts requests issued in the window that had not ended
	// when it closed (excluded from Requests, RPS and latency).
	InFlight int64 `json:"in_flight"`
	// RPS = Requests / DurationS.
	RPS float64 `json:"rps"`
	// BytesRead counts response bytes on the wire (headers, framing, body).
	BytesRead int64 `json:"bytes_read"`
	// TransferBps = BytesRead / DurationS, bytes per second.
	TransferBps float64 `json:"transfer_bps"`
	// Status maps status code to completed responses.
	Status map[string]int64 `json:"status"`
	// Non2xx3xx counts completed responses outside 200-399 (wrk's
	// "Non-2xx or 3xx responses").
	Non2xx3xx int64 `json:"non_2xx_3xx"`
	// Errors maps error kind to failed requests.
	Errors map[string]int64 `json:"errors"`
	// Latency summarizes completed responses' latency in µs, from the
	// request's start (its write, or its connect when it opens one; in open
	// loop its intended send time) to its last body byte; null when there
	// were none.
	Latency *hist.Summary `json:"latency_us"`
	// StartSkewUs is the spread of the agents' first sends, µs.
	StartSkewUs float64 `json:"start_skew_us"`
	// ConnectionsOpened counts connections opened in the window (those
	// opened before the start count in the first interval).
	ConnectionsOpened int64 `json:"connections_opened"`
	// Reconnects counts connections reopened after a server close or an
	// error.
	Reconnects int64 `json:"reconnects"`
	// Retries counts requests resent because the server never processed
	// them (HTTP/2 GOAWAY).
	Retries int64 `json:"retries"`
	// Handshakes counts TLS handshakes, full and resumed.
	Handshakes Handshakes `json:"handshakes"`
	// ConnectUs summarizes TCP connect times of new connections.
	ConnectUs *hist.Summary `json:"connect_us"`
	// TLSHandshakeUs summarizes all TLS handshakes; the Full and Resumed
	// variants each kind.
	TLSHandshakeUs        *hist.Summary `json:"tls_handshake_us"`
	TLSHandshakeFullUs    *hist.Summary `json:"tls_handshake_full_us"`
	TLSHandshakeResumedUs *hist.Summary `json:"tls_handshake_resumed_us"`
	// TTFBUs summarizes the time from a request's write to its first
	// response byte, over completed responses.
	TTFBUs *hist.Summary `json:"ttfb_us"`
	// TLS counts negotiated parameters per connection.
	TLS TLSCounts `json:"tls"`
	// MaxStreams is the effective concurrent streams per HTTP/2 connection
	// (the plan's, capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS);
	// 0 for HTTP/1.1.
	MaxStreams int32 `json:"h2_max_streams,omitempty"`
	// Warmup reports the warm-up, excluded from everything above; absent
	// without one.
	Warmup *Warmup `json:"warmup,omitempty"`
	// AgentRows has one row per agent.
	AgentRows []Agent `json:"agents"`
}

// TimelinePoint is one interval of the window.
type TimelinePoint struct {
	Index     int32     `json:"index"`
	StartS    float64   `json:"start_s"`
	DurationS float64   `json:"duration_s"`
	Requests  int64     `json:"requests"`
	RPS       float64   `json:"rps"`
	Errors    int64     `json:"errors"`
	Missed    int64     `json:"missed"`
	TargetRPS float64   `json:"target_rps,omitempty"`
	P50Us     int64     `json:"p50_us"`
	P90Us     int64     `json:"p90_us"`
	P99Us     int64     `json:"p99_us"`
	MaxUs     int64     `json:"max_us"`
	CPUBusy   []float64 `json:"cpu_busy"`
	// LatencyV2 is the interval's latency histogram merged across agents,
	// HdrHistogram V2 compressed (base64 in the JSON, as in an .hlog
	// line); the percentiles above are read from it.
	LatencyV2 []byte `json:"latency_v2,omitempty"`
}

// Stage is one plan stage's outcome.
type Stage struct {
	Index      int32            `json:"index"`
	StartS     float64          `json:"start_s"`
	DurationS  float64          `json:"duration_s"`
	TargetFrom int64            `json:"target_from"`
	TargetTo   int64            `json:"target_to"`
	Requests   int64            `json:"requests"`
	RPS        float64          `json:"rps"`
	Errors     map[string]int64 `json:"errors"`
	Status     map[string]int64 `json:"status"`
	Latency    *hist.Summary    `json:"latency_us"`
	// ChangeSkewUs is the spread across agents of the instant each began
	// this stage's schedule (open loop, stages after the first), µs.
	ChangeSkewUs float64 `json:"change_skew_us"`
}

// Handshakes counts TLS handshakes by kind.
type Handshakes struct {
	Full    int64 `json:"full"`
	Resumed int64 `json:"resumed"`
}

// TLSCounts counts connections by negotiated TLS parameter.
type TLSCounts struct {
	Version map[string]int64 `json:"version"`
	Cipher  map[string]int64 `json:"cipher"`
	Group   map[string]int64 `json:"group"`
	ALPN    map[string]int64 `json:"alpn"`
}

// Warmup is the warm-up's outcomes.
type Warmup struct {
	DurationS float64          `json:"duration_s"`
	Requests  int64            `json:"requests"`
	Status    map[string]int64 `json:"status"`
	Errors    map[string]int64 `json:"errors"`
}

// Agent is one agent's row.
type Agent struct {
	Name        string  `json:"name"`
	Connections int64   `json:"connections"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	InFlight    int64   `json:"in_flight"`
	RPS         float64 `json:"rps"`
	// CPUUtil is the agent process's CPU time in the window over the
	// window times its usable CPUs, a 0-1 fraction.
	CPUUtil float64 `json:"cpu_util"`
	CPUs    int32   `json:"cpus"`
	// CPUList is the agent's pin map (taskset -c syntax); empty when the
	// agent was not pinned.
	CPUList       string  `json:"cpu_list,omitempty"`
	Missed        int64   `json:"missed"`
	ClockOffsetUs float64 `json:"clock_offset_us"`
	RTTUs         float64 `json:"rtt_us"`
	// StartOffsetUs is the agent's first send minus the start instant.
	StartOffsetUs float64 `json:"start_offset_us"`
	// Error says why the agent's share ended early; its measurements up to
	// then are included.
	Error string `json:"error,omitempty"`
}

// FromResult builds the report of a merged run result. It fails on a
// corrupt histogram.
func FromResult(r *pb.RunResult) (*Report, error) {
	var hs [6]*hist.Histogram
	for i, b := range [][]byte{r.GetHistograms().GetLatency(), r.GetHistograms().GetConnect(), r.GetHistograms().GetTlsFull(), r.GetHistograms().GetTlsResumed(), r.GetHistograms().GetTtfb(), r.GetHistograms().GetServiceTime()} {
		h, err := hist.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", r.GetRunId(), err)
		}
		hs[i] = h
	}
	latency, connect, tlsFull, tlsResumed, ttfb, service := hs[0], hs[1], hs[2], hs[3], hs[4], hs[5]
	tlsAll := hist.New()
	if err := tlsAll.Merge(tlsFull); err != nil {
		return nil, err
	}
	if err := tlsAll.Merge(tlsResumed); err != nil {
		return nil, err
	}
	window := r.GetWindow().AsDuration().Seconds()
	c := r.GetCounters()
	rep := &Report{
		RunID:                 r.GetRunId(),
		Target:                r.GetPlan().GetUrl(),
		StartedAt:             time.Unix(0, r.GetStartedAtUnixNano()).UTC(),
		DurationS:             window,
		PlanDurationS:         r.GetPlan().GetDuration().AsDuration().Seconds(),
		PlanRequests:          r.GetPlan().GetRequests(),
		StoppedEarly:          r.GetStoppedEarly(),
		AgentCount:            len(r.GetAgents()),
		Connections:           r.GetPlan().GetConnections(),
		Issued:                c.GetIssued(),
		Requests:              c.GetRequests(),
		InFlight:              r.GetInFlight(),
		BytesRead:             c.GetBytesRead(),
		Status:                statusMap(c.GetStatus()),
		Errors:                copyMap(c.GetErrors()),
		Latency:               latency.Summarize(),
		StartSkewUs:           us(r.GetStartSkew().AsDuration()),
		ConnectionsOpened:     c.GetConnectionsOpened(),
		Reconnects:            c.GetReconnects(),
		Retries:               c.GetRetries(),
		Handshakes:            Handshakes{Full: c.GetHandshakesFull(), Resumed: c.GetHandshakesResumed()},
		ConnectUs:             connect.Summarize(),
		TLSHandshakeUs:        tlsAll.Summarize(),
		TLSHandshakeFullUs:    tlsFull.Summarize(),
		TLSHandshakeResumedUs: tlsResumed.Summarize(),
		TTFBUs:                ttfb.Summarize(),
		TLS:                   tlsCounts(c.GetTls()),
		MaxStreams:            r.GetMaxStreams(),
		Mode:                  "closed",
		LatencyBasis:          "actual send",
		Missed:                c.GetMissed(),
	}
	pl := r.GetPlan()
	if pl.GetOpenLoop() != nil {
		rep.Mode, rep.LatencyBasis = "open", "intended send"
		rep.ServiceTimeUs = service.Summarize()
	}
	for _, pt := range r.GetTimeline() {
		tp := TimelinePoint{
			Index: pt.GetIndex(), StartS: pt.GetStart().AsDuration().Seconds(), DurationS: pt.GetLength().AsDuration().Seconds(),
			Requests: pt.GetRequests(), Errors: pt.GetErrors(), Missed: pt.GetMissed(), TargetRPS: pt.GetTargetRps(),
			CPUBusy: pt.GetCpuBusy(),
		}
		if b := pt.GetLatency(); len(b) > 0 {
			tp.LatencyV2 = b
			h, err := hist.Decode(b)
			if err != nil {
				return nil, fmt.Errorf("run %s interval %d: %w", r.GetRunId(), pt.GetIndex(), err)
			}
			if h.Count() > 0 {
				tp.P50Us, tp.P90Us, tp.P99Us, tp.MaxUs = h.ValueAtPercentile(50), h.ValueAtPercentile(90), h.ValueAtPercentile(99), h.Max()
			}
		}
		if tp.DurationS > 0 {
			tp.RPS = float64(tp.Requests) / tp.DurationS
		}
		rep.Timeline = append(rep.Timeline, tp)
		rep.TargetRPS += tp.TargetRPS * tp.DurationS
	}
	if window > 0 {
		rep.TargetRPS /= window
	}
	for _, st := range r.GetStages() {
		h, err := hist.Decode(st.GetLatency())
		if err != nil {
			return nil, fmt.Errorf("run %s stage %d: %w", r.GetRunId(), st.GetIndex(), err)
		}
		sr := Stage{
			Index: st.GetIndex(), StartS: st.GetStart().AsDuration().Seconds(), DurationS: st.GetDuration().AsDuration().Seconds(),
			TargetFrom: st.GetTargetFrom(), TargetTo: st.GetTargetTo(), Requests: st.GetCounters().GetRequests(),
			Errors: copyMap(st.GetCounters().GetErrors()), Status: statusMap(st.GetCounters().GetStatus()), Latency: h.Summarize(),
			ChangeSkewUs: us(st.GetChangeSkew().AsDuration()),
		}
		if sr.DurationS > 0 {
			sr.RPS = float64(sr.Requests) / sr.DurationS
		}
		rep.Stages = append(rep.Stages, sr)
	}
	if window > 0 {
		rep.RPS = float64(rep.Requests) / window
		rep.TransferBps = float64(rep.BytesRead) / window
	}
	for code, n := range c.GetStatus() {
		if code < 200 || code > 399 {
			rep.Non2xx3xx += n
		}
	}
	if wd := r.GetWarmupDuration().AsDuration(); wd > 0 {
		w := r.GetWarmup()
		rep.Warmup = &Warmup{DurationS: wd.Seconds(), Requests: w.GetRequests(), Status: statusMap(w.GetStatus()), Errors: copyMap(w.GetErrors())}
	}
	for _, a := range r.GetAgents() {
		row := Agent{
			Name: a.GetName(), Connections: a.GetConnections(), Requests: a.GetRequests(),
			Errors: a.GetErrors(), InFlight: a.GetInFlight(), CPUs: a.GetCpus(),
			ClockOffsetUs: us(a.GetClockOffset().AsDuration()), RTTUs: us(a.GetRtt().AsDuration()),
			StartOffsetUs: us(a.GetStartOffset().AsDuration()), Error: a.GetError(),
			CPUList: a.GetCpuList(), Missed: a.GetMissed(),
		}
		if window > 0 {
			row.RPS = float64(a.GetRequests()) / window
			if a.GetCpus() > 0 {
				row.CPUUtil = a.GetCpuTime().AsDuration().Seconds() / (window * float64(a.GetCpus()))
			}
		}
		rep.AgentRows = append(rep.AgentRows, row)
	}
	rep.flagClientBound()
	return rep, nil
}

// Client-bound thresholds (docs/design.md, invariant 6).
const (
	clientBusyLimit   = 0.90
	clientMissedLimit = 0.01
)

// flagClientBound marks a run whose numbers may measure the client.
func (r *Report) flagClientBound() {
	for _, a := range r.AgentRows {
		if a.CPUUtil > clientBusyLimit {
			r.ClientBoundReasons = append(r.ClientBoundReasons, fmt.Sprintf("agent %s's CPUs were %.0f %% busy", a.Name, 100*a.CPUUtil))
		}
	}
	if r.Mode == "open" && r.Issued > 0 && float64(r.Missed) > clientMissedLimit*float64(r.Issued) {
		r.ClientBoundReasons = append(r.ClientBoundReasons, fmt.Sprintf("%d of %d sends (%.1f %%) started late", r.Missed, r.Issued, 100*float64(r.Missed)/float64(r.Issued)))
	}
	r.ClientBound = len(r.ClientBoundReasons) > 0
}

func statusMap(m map[int32]int64) map[string]int64 {
	out := map[string]int64{}
	for code, n := range m {
		out[strconv.Itoa(int(code))] = n
	}
	return out
}

func copyMap(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// tlsCounts splits "kind:value" keys into per-kind maps.
func tlsCounts(m map[string]int64) TLSCounts {
	t := TLSCounts{Version: map[string]int64{}, Cipher: map[string]int64{}, Group: map[string]int64{}, ALPN: map[string]int64{}}
	for k, n := range m {
		kind, v, _ := strings.Cut(k, ":")
		switch kind {
		case "version":
			t.Version[v] += n
		case "cipher":
			t.Cipher[v] += n
		case "group":
			t.Group[v] += n
		case "alpn":
			t.ALPN[v] += n
		}
	}
	return t
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ErrorTotal returns the number of failed requests.
func (r *Report) ErrorTotal() int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// TextOptions selects optional text sections.
type TextOptions struct {
	// Latency prints the percentile distribution (wrk's --latency).
	Latency bool
}

// WriteText writes r in wrk's layout, extended with the cluster's lines.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	p := &printer{w: w}
	switch {
	case r.PlanRequests > 0:
		p.f("Running %d-request test @ %s\n", r.PlanRequests, r.Target)
	case r.StoppedEarly && r.PlanDurationS > 0:
		p.f("Running %s test @ %s\n", fmtWindow(r.PlanDurationS), r.Target) // as planned; the next lines say what ran
	default:
		p.f("Running %s test @ %s\n", fmtWindow(r.DurationS), r.Target)
	}
	p.f("  %s and %s\n", plural(int64(r.AgentCount), "agent"), plural(r.Connections, "connection"))
	if r.StoppedEarly {
		of := ""
		if r.PlanDurationS > 0 {
			of = " of " + fmtWindow(r.PlanDurationS)
		}
		p.f("  Stopped early by the user after %s%s\n", fmtSeconds(r.DurationS), of)
	}
	if r.Mode == "open" {
		p.f("  open loop%s; latency from each request's intended send time\n", r.targetText())
	}
	if r.MaxStreams > 0 {
		p.f("  HTTP/2, %d concurrent streams per connection\n", r.MaxStreams)
	}
	if r.Latency == nil {
		p.f("  Latency: no samples (no request completed in the window)\n")
	} else {
		p.f("  %-10s %9s %9s %9s\n", "", "Avg", "Stdev", "Max")
		p.f("    %-8s %9s %9s %9s\n", "Latency", fmtUs(r.Latency.Mean), fmtUs(r.Latency.Stdev), fmtUs(float64(r.Latency.Max)))
		if o.Latency {
			from := "request start"
			if r.Mode == "open" {
				from = "intended send time"
			}
			p.f("  Latency Distribution (completed responses, %s to last byte)\n", from)
			for _, q := range []struct {
				label string
				v     int64
			}{{"50%", r.Latency.P50}, {"75%", r.Latency.P75}, {"90%", r.Latency.P90}, {"99%", r.Latency.P99}, {"99.9%", r.Latency.P999}, {"99.99%", r.Latency.P9999}} {
				p.f("  %7s %9s\n", q.label, fmtUs(float64(q.v)))
			}
		}
	}
	phases := []struct {
		name string
		s    *hist.Summary
	}{{"Service", r.ServiceTimeUs}, {"Connect", r.ConnectUs}, {"TLS full", r.TLSHandshakeFullUs}, {"TLS resumed", r.TLSHandshakeResumedUs}, {"TTFB", r.TTFBUs}}
	header := false
	for _, ph := range phases {
		if ph.s == nil {
			continue
		}
		if !header {
			p.f("  %-13s %9s %9s %9s %9s %8s\n", "Phases", "Avg", "p50", "p99", "Max", "Count")
			header = true
		}
		p.f("    %-11s %9s %9s %9s %9s %8d\n", ph.name, fmtUs(ph.s.Mean), fmtUs(float64(ph.s.P50)), fmtUs(float64(ph.s.P99)), fmtUs(float64(ph.s.Max)), ph.s.Count)
	}
	p.f("  %d requests in %s, %s read\n", r.Requests, fmtSeconds(r.DurationS), fmtBytes(float64(r.BytesRead)))
	p.f("  %s opened, %s", plural(r.ConnectionsOpened, "connection"), plural(r.Reconnects, "reconnect"))
	if r.Handshakes.Full+r.Handshakes.Resumed > 0 {
		p.f("; TLS handshakes: %d full, %d resumed", r.Handshakes.Full, r.Handshakes.Resumed)
	}
	if r.Retries > 0 {
		p.f("; %d retries", r.Retries)
	}
	p.f("\n")
	if len(r.TLS.Version) > 0 {
		p.f("  TLS (connections): %s; %s; %s", fmtCounts(r.TLS.Version), fmtCounts(r.TLS.Cipher), fmtCounts(r.TLS.Group))
		if len(r.TLS.ALPN) > 0 {
			p.f("; ALPN %s", fmtCounts(r.TLS.ALPN))
		}
		p.f("\n")
	}
	if r.InFlight > 0 {
		p.f("  %d requests in flight when the window closed (not counted above)\n", r.InFlight)
	}
	if r.Non2xx3xx > 0 {
		p.f("  Non-2xx or 3xx responses: %d\n", r.Non2xx3xx)
		p.f("  Status codes: %s\n", fmtMap(r.Status))
	}
	if n := r.ErrorTotal(); n > 0 {
		p.f("  Errors: %d (%s)\n", n, fmtMap(r.Errors))
	}
	if r.Mode == "open" {
		label := "Target"
		if len(r.Stages) > 0 {
			label = "Mean target"
		}
		p.f("  %s %.2f requests/sec, achieved %.2f; %d sends started late (missed)\n", label, r.TargetRPS, r.RPS, r.Missed)
	}
	if len(r.Stages) > 0 {
		p.f("  %-6s %8s %8s %16s %10s %9s %9s %7s\n", "Stage", "Start", "Length", "Target", "REQ/S", "p50", "p99", "Errors")
		for _, st := range r.Stages {
			p50, p99 := "-", "-"
			if st.Latency != nil {
				p50, p99 = fmtUs(float64(st.Latency.P50)), fmtUs(float64(st.Latency.P99))
			}
			p.f("  %-6d %7.1fs %7.1fs %7d → %-6d %10.2f %9s %9s %7d\n", st.Index, st.StartS, st.DurationS, st.TargetFrom, st.TargetTo, st.RPS, p50, p99, sum(st.Errors))
		}
	}
	p.f("Requests/sec: %10.2f\n", r.RPS)
	p.f("Transfer/sec: %10s\n", fmtBytes(r.TransferBps))
	p.f("Start skew:   %10s across agents\n", fmtUs(r.StartSkewUs))
	if w := r.Warmup; w != nil {
		p.f("Warm-up:      %s, %d requests, %d errors (excluded above)\n", fmtSeconds(w.DurationS), w.Requests, sum(w.Errors))
	}
	if r.ClientBound {
		p.f("WARNING: client-bound: %s; these numbers may measure the load generators, not the server\n", strings.Join(r.ClientBoundReasons, "; "))
	}
	p.f("Agents:\n")
	p.f("  %-20s %6s %10s %10s %7s %8s %10s %10s %s\n", "NAME", "CONNS", "REQUESTS", "REQ/S", "CPU", "ERRORS", "START", "OFFSET", "PINNED")
	for _, a := range r.AgentRows {
		pinned := a.CPUList
		if pinned == "" {
			pinned = "-"
		}
		p.f("  %-20s %6d %10d %10.2f %6.1f%% %8d %10s %10s %s\n", a.Name, a.Connections, a.Requests, a.RPS, 100*a.CPUUtil, a.Errors, fmtSignedUs(a.StartOffsetUs), fmtSignedUs(a.ClockOffsetUs), pinned)
		if a.Error != "" {
			p.f("    ! %s (its measurements until then are included)\n", a.Error)
		}
	}
	p.f("Run ID: %s\n", r.RunID)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// fmtUs formats microseconds as wrk does: us, ms or s with two decimals.
func fmtUs(v float64) string {
	switch {
	case v < 1000:
		return fmt.Sprintf("%.2fus", v)
	case v < 1e6:
		return fmt.Sprintf("%.2fms", v/1e3)
	default:
		return fmt.Sprintf("%.2fs", v/1e6)
	}
}

func fmtSignedUs(v float64) string {
	if v < 0 {
		return "-" + fmtUs(-v)
	}
	return "+" + fmtUs(v)
}

// fmtBytes formats a byte count with binary prefixes, as wrk does.
func fmtBytes(v float64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

func fmtSeconds(s float64) string { return fmt.Sprintf("%.2fs", s) }

// fmtWindow formats a window of s seconds as wrk does its -d: "10s",
// "1m", "1m30s"; fractions of a second are rounded to 10 ms ("1.78s").
func fmtWindow(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond)
	if d >= time.Minute {
		d = d.Round(time.Second)
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// plural formats n and word, adding an s unless n is 1.
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// targetText describes the open-loop target after "open loop": " at R
// requests/sec target", or with stages their targets in order and the
// window's mean.
func (r *Report) targetText() string {
	if len(r.Stages) == 0 {
		return fmt.Sprintf(" at %.0f requests/sec target", r.TargetRPS)
	}
	steps := []string{strconv.FormatInt(r.Stages[0].TargetFrom, 10)}
	for _, st := range r.Stages {
		steps = append(steps, strconv.FormatInt(st.TargetTo, 10))
	}
	return fmt.Sprintf(", %s, %s requests/sec target (mean %.0f)", plural(int64(len(r.Stages)), "stage"), strings.Join(steps, "→"), r.TargetRPS)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// fmtCounts formats "value (n), value (n)" in key order.
func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d)", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func fmtMap(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, m[k])
	}
	return out
}

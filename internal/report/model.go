package report

import (
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// Run is a run's merged result as the report reads it: what a
// coordinator's RunResult holds, decoded (internal/wire's RunFromProto
// builds it from the proto). Durations are the coordinator's.
type Run struct {
	ID string
	// Target is the plan's URL; Load its load model (never re-derived
	// from which fields are set).
	Target string
	Load   plan.Load
	// ConnectionRate is set when the open-loop rate was new connections/s
	// (--cps), each sending RequestsPerConnection requests (0: the
	// handshake only).
	ConnectionRate        bool
	RequestsPerConnection int
	// MaxOpen is a connection-rate plan's cap on connections open at once
	// (--max-open; 0 otherwise).
	MaxOpen int64
	// CloseReset is set when connections closed with a TCP reset
	// (--close rst).
	CloseReset bool
	// ResumeRatio is the plan's fraction of handshakes offered a session
	// (--resume-ratio; 0 without one).
	ResumeRatio float64
	// PacingWindow is the open-loop plan's pacing window (--pacing-window;
	// 0: each request scheduled at its own instant).
	PacingWindow time.Duration
	// PacingSpin is set when the open-loop plan spun to each intended
	// send time (--pacing-spin).
	PacingSpin bool
	// Connections is the plan's; PlanDuration its window (-d, 0 in count
	// mode without one) and PlanRequests its count (-n, 0 in duration
	// mode).
	Connections  int64
	PlanDuration time.Duration
	PlanRequests int64
	// StartedAt is the start instant; Window the measurement window (the
	// planned one, or shortened: StoppedEarly, or the count ran out).
	StartedAt    time.Time
	Window       time.Duration
	StoppedEarly bool
	// Partial is set when the run was not whole (it lost an agent, see
	// Agents' Lost, or CoordinatorLost); Aborted when the plan's
	// on_agent_loss abort ended it at the loss. OnAgentLoss is the plan's
	// policy ("abort" or "continue").
	Partial, Aborted bool
	OnAgentLoss      string
	// CoordinatorStall is the coordinator's longest stall (0: none over
	// 1 s).
	CoordinatorStall time.Duration
	// CoordinatorLost, when not empty, says how coordctl lost the
	// coordinator mid-run: the Run was then built by coordctl from the
	// intervals it received (no phase histograms, warm-up or agent rows),
	// and AgentCount gives the number of agents.
	CoordinatorLost string
	AgentCount      int
	// LostAgents are losses known without agent rows (coordctl's report
	// after losing the coordinator, from the losses it was told of).
	LostAgents []LostAgent
	// Histograms and Counts cover the window, merged across agents
	// (Counts.Issued is the run's total).
	Histograms *hist.Set
	Counts     measure.Counts
	InFlight   int64
	// StartSkew is the spread of the agents' first sends; StartSkewUnknown
	// is set when an agent's first send is unknown (no skew then).
	StartSkew        time.Duration
	StartSkewUnknown bool
	// Warmup and WarmupDuration: the warm-up's outcomes (0: none).
	Warmup         measure.Counts
	WarmupDuration time.Duration
	MaxStreams     int32
	// HTTP3 is set when the plan spoke HTTP/3 over QUIC (plan.H3).
	HTTP3    bool
	Timeline []Interval
	Stages   []StageRun
	Agents   []AgentRun
	// Mix has each request of the plan's mix measured apart (2 to 16
	// requests), in mix order, over MixAgents agents (those that ended
	// with their Done); Requests labels them (the plan's mix).
	Mix       []MixRun
	MixAgents int
	Requests  []plan.Request
	// Provenance is the plan hash and the coordinator's build
	// (provenance.go); each agent's is in Agents.
	Provenance RunProvenance
	// Verdict and Labels: the thresholds' outcome, and the stored run's
	// tags, note and search (thresholds.go).
	Verdict Verdict
	Labels  Labels
}

// Interval is one timeline point of a Run.
type Interval struct {
	Index                    int32
	Start, Length            time.Duration
	Requests, Errors, Missed int64
	TargetRPS                float64
	TargetConnections        float64
	CPUBusy                  []float64
	// Connections is the number of connections opened in the interval,
	// AgentConnections each agent's (in the order of Run.Agents).
	Connections      int64
	AgentConnections []int64
	// GrowthRefused is the interval's sends found late at the connection
	// cap (measure.Counts.GrowthRefused).
	GrowthRefused int64
	// Backlogged is the interval's sends late for a busy connection
	// (measure.Counts.Backlogged).
	Backlogged int64
	// Agents is the number of agents merged in the interval; Partial is
	// set when a lost agent is missing from it.
	Agents  int32
	Partial bool
	// V2 holds, by hist.Kind, the interval's histograms merged across
	// agents, HdrHistogram V2 encoded as the result carries them (µs): the
	// latency always, service time and send lateness in open loop, the
	// phases (connect, TLS full and resumed, TTFB) in a result that keeps
	// them per interval; nil for a kind it does not hold (an interval with
	// no sample of a phase keeps none). They stay encoded, a few KB each:
	// renderers decode one interval at a time (Sparse, Histogram), so that
	// a day of 1 s intervals is not expanded to 229 KB per histogram.
	V2 [hist.NumKinds][]byte
}

// Sparse decodes the interval's histogram of kind k into s with dec
// (empty when the interval holds none). Errors: a corrupt histogram.
func (iv *Interval) Sparse(dec *hist.Decoder, k hist.Kind, s *hist.Sparse) error {
	return decodeSparse(dec, iv.V2[k], s)
}

// decodeSparse decodes b into s (empty for no bytes).
func decodeSparse(dec *hist.Decoder, b []byte, s *hist.Sparse) error {
	if len(b) == 0 {
		s.Values, s.Counts, s.Index, s.Total = s.Values[:0], s.Counts[:0], s.Index[:0], 0
		return nil
	}
	return dec.Decode(b, s)
}

// Histogram decodes the interval's histogram of kind k (an empty one when
// the interval holds none): a full histogram (229 KB), for one interval
// at a time. Errors: a corrupt histogram.
func (iv *Interval) Histogram(k hist.Kind) (*hist.Histogram, error) {
	if len(iv.V2[k]) == 0 {
		return hist.New(), nil
	}
	return hist.Decode(iv.V2[k])
}

// MixRun is one request of a mix, measured apart over the window.
type MixRun struct {
	Counts  measure.Counts
	Latency *hist.Histogram
}

// StageRun is one stage of a Run.
type StageRun struct {
	Index           int32
	Start, Duration time.Duration
	TargetFrom      int64
	TargetTo        int64
	Counts          measure.Counts
	Latency         *hist.Histogram
	ChangeSkew      time.Duration
}

// AgentRun is one agent's row of a Run.
type AgentRun struct {
	Name                       string
	Connections                int64
	Requests, Errors, InFlight int64
	Missed                     int64
	// ClientLate counts its open-loop sends late by its own delay
	// (measure.Counts.ClientLate).
	ClientLate       int64
	CPUTime          time.Duration
	CPUWait          time.Duration // run-queue delay, summed over threads
	CPUs             int32
	CPUList          string
	ClockOffset, RTT time.Duration
	// StartOffset is its first send minus the start instant;
	// StartOffsetUnknown is set when that is not known (it sent nothing,
	// or failed before its end).
	StartOffset        time.Duration
	StartOffsetUnknown bool
	Error              string
	// IntervalRPS is its completed responses per second in each interval
	// (wrk's per-thread Req/Sec samples), a last interval shorter than a
	// whole one folded into the one before; empty when unknown.
	IntervalRPS []float64
	// Rate is the agent's share of the open-loop rate. Lost is set when
	// the run lost it after the start; LostAt is when (from the window's
	// start). Ran is how long its load ran as far as the result holds it
	// (its own window: count mode ends each agent at its last response),
	// over which its row's rates are; 0 when unknown (the run's window).
	Rate        int64
	Lost        bool
	LostAt, Ran time.Duration
	// Provenance is the agent's host and build (nil: it sent none).
	Provenance *AgentProvenance
	// Intervals are the agent's own intervals as it sent them, when the
	// result kept them (coordctl run --hlog, --csv-per-agent); nil
	// otherwise.
	Intervals []AgentInterval
}

// AgentInterval is one agent's interval k: its bounds as offsets from the
// agent's window start, its counts and its latency histogram (µs, V2
// encoded, kept encoded as Interval.V2 is), exactly as the agent sent
// them.
type AgentInterval struct {
	Index                    int32
	Start, Length            time.Duration
	Requests, Errors, Missed int64
	CPUTime                  time.Duration
	LatencyV2                []byte
}

// Report is one run's report. JSON field names are part of the interface
// (see README "The report").
type Report struct {
	RunID string `json:"run_id"`
	// NotStored is set by the caller when no run store keeps the run
	// (coordctl demo with an empty --data-dir): the text and h2load reports then say
	// "(not stored)" after the run ID, which coordctl report cannot find.
	NotStored bool `json:"not_stored,omitempty"`
	Labels
	Verdict
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
	// Partial is set when the run was not whole: an agent was lost
	// (LostAgents), or coordctl lost the coordinator (CoordinatorLost).
	// DurationS then never exceeds the load the report holds, and every
	// rate is over it. Aborted is set when on_agent_loss abort stopped
	// every other agent at the loss. OnAgentLoss is the plan's policy.
	Partial     bool   `json:"partial"`
	Aborted     bool   `json:"aborted,omitempty"`
	OnAgentLoss string `json:"on_agent_loss,omitempty"`
	// LostAgents lists the agents lost after the start, in agent order.
	LostAgents []LostAgent `json:"lost_agents,omitempty"`
	// CoordinatorStallS is the coordinator's longest stall in seconds
	// (frozen or starved; agents stop their load after 2 s without it),
	// when over 1 s.
	CoordinatorStallS float64 `json:"coordinator_stall_s,omitempty"`
	// CoordinatorLost says how coordctl lost the coordinator mid-run: the
	// report is then coordctl's, from the intervals it received, without
	// phase timings, warm-up or agent rows.
	CoordinatorLost string `json:"coordinator_lost,omitempty"`
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
	// PacingWindowUs is the open-loop plan's pacing window in µs
	// (--pacing-window): intended send times were rounded down to
	// multiples of it, and latency and send lateness run from the rounded
	// times. Omitted when 0 (each request at its own instant).
	PacingWindowUs int64 `json:"pacing_window_us,omitempty"`
	// PacingSpin is true when the open-loop plan ended each send's timer
	// wait early and spun to its intended time (--pacing-spin), which
	// narrows the send lateness for more client CPU. Omitted when false.
	PacingSpin bool `json:"pacing_spin,omitempty"`
	// Close is how the tool closed its connections: "fin" (the default)
	// or "rst" (a TCP reset, --close rst).
	Close string `json:"close"`
	// ConnectionRate holds a connection-rate run's figures (--cps; then
	// TargetRPS is 0, the schedule's target being connections); null
	// otherwise.
	ConnectionRate *ConnectionRate `json:"connection_rate,omitempty"`
	// Missed counts open-loop sends that started more than 5 ms late
	// (engine.MissThreshold), or never before the window closed.
	Missed int64 `json:"missed"`
	// Unsent counts the open-loop sends among Missed that were never sent
	// (no connection was free before the window closed); they are not in
	// Issued. Omitted when 0.
	Unsent int64 `json:"unsent,omitempty"`
	// Backlogged counts the open-loop sends among Missed that were late
	// because every connection was busy when they were due (the server
	// held them), Unsent included; Missed − Backlogged were late by the
	// agents' own scheduling. Omitted when 0.
	Backlogged int64 `json:"backlogged,omitempty"`
	// GrowthRefused counts the open-loop sends among Missed found due for
	// more than 5 ms with every connection busy and the cap reached
	// (--max-open with --cps, --max-connections with -R): the engine would
	// have opened a connection for each, and the cap refused it. Omitted
	// when 0 (always 0 where growth is off: -R without --max-connections).
	GrowthRefused int64 `json:"growth_refused,omitempty"`
	// Queued counts the open-loop sends whose connection was still busy
	// at their intended time: they left when it freed, and that wait (the
	// server's, or too few connections') is in their lateness and
	// latency. Omitted when 0.
	Queued int64 `json:"queued,omitempty"`
	// ClientLate counts the open-loop sends that left more than 1 ms
	// (measure.ClientLateLimit) after both their intended time and their
	// connection's freeing: the agents' own delay. Over ClientMissedLimit
	// of the sends it flags the run client-bound. Omitted when 0.
	ClientLate int64 `json:"client_late,omitempty"`
	// Carried counts the open-loop sends intended in the warm-up that
	// ended in the window (or were in flight at its end): they are among
	// Requests, the errors and InFlight (outcomes go by their end, their
	// latency from their intended time), but not among the window's
	// scheduled sends, which are Issued + Unsent − Carried; Missed,
	// Backlogged, Queued, ClientLate and SendLatenessUs leave them out.
	// Omitted when 0.
	Carried int64 `json:"carried,omitempty"`
	// ServiceTimeUs summarizes open-loop latencies from the actual send
	// (wrk2's uncorrected histogram); null in closed loop.
	ServiceTimeUs *hist.Summary `json:"service_time_us"`
	// SendLatenessUs summarizes open-loop send lateness: each send's actual
	// start (its write, or its connect when it opened its connection)
	// minus its intended send time, whatever its outcome: the tool's own
	// error in Latency, and the wait for a busy connection (Queued); null
	// in closed loop.
	SendLatenessUs *hist.Summary `json:"send_lateness_us"`
	// ClientBound is set when the load generators were the limit
	// (bound.go, docs/design.md invariant 6): an agent's CPUs over
	// ClientBusyLimit busy, its threads waiting for a CPU over
	// ClientWaitLimit seconds per second per CPU, or more than
	// ClientMissedLimit of the open-loop sends late by the agents' own
	// delay (missed but not backlogged, else client-late: ClientLate),
	// never by a wait for a busy connection: the numbers may measure the
	// client, not the server. Each reason names its agent, or for late
	// sends the agents that sent client-late.
	ClientBound        bool     `json:"client_bound"`
	ClientBoundReasons []string `json:"client_bound_reasons,omitempty"`
	// ServerBound is set, when the run is not client-bound, for an
	// open-loop run where more than ClientMissedLimit of the sends found
	// every connection busy (Backlogged): the server held the
	// connections and the agents were not the limit.
	ServerBound        bool     `json:"server_bound"`
	ServerBoundReasons []string `json:"server_bound_reasons,omitempty"`
	// Stall is said instead of ServerBound when the backlog was a stall:
	// outside one interval, not the last, the backlogged sends were under
	// ClientMissedLimit of those scheduled, and none was left unsent. A
	// stall of the server and one of the agents look alike from the
	// client (either way the responses were read late), so it blames
	// neither; the latency includes it. Empty otherwise.
	Stall string `json:"stall,omitempty"`
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
	// OKRequests counts completed responses of status 200-399 (the
	// successes), OKRPS = OKRequests / DurationS, and OKLatency summarizes
	// their latency alone (µs, timed as Latency; hist.OK): a server that
	// answers fast 429s or 503s under overload makes Latency look better
	// as it fails, never these.
	OKRequests int64         `json:"ok_requests"`
	OKRPS      float64       `json:"ok_rps"`
	OKLatency  *hist.Summary `json:"ok_latency_us"`
	// Errors maps error kind to failed requests.
	Errors map[string]int64 `json:"errors"`
	// Latency summarizes completed responses' latency in µs, from the
	// request's start (its write, or its connect when it opens one; in open
	// loop its intended send time) to its last body byte; null when there
	// were none.
	Latency *hist.Summary `json:"latency_us"`
	// StartSkewUs is the spread of the agents' first sends, µs;
	// StartSkewUnknown is set (and StartSkewUs 0) when an agent's first
	// send is unknown (it sent nothing, or failed before its end).
	StartSkewUs      float64 `json:"start_skew_us"`
	StartSkewUnknown bool    `json:"start_skew_unknown,omitempty"`
	// StartSkewBoundUs bounds StartSkewUs's error, µs: each agent's
	// clock offset is known to within half the round trip of the sample
	// it was taken from (NTP's bound, RFC 5905 section 8), so a spread of
	// first sends to within the two largest such halves summed, over the
	// agents whose first send is known. 0 with fewer than two of them.
	StartSkewBoundUs float64 `json:"start_skew_bound_us,omitempty"`
	// ConnectionsOpened counts connections opened in the window (those
	// opened before the start count in the first interval).
	ConnectionsOpened int64 `json:"connections_opened"`
	// Reconnects counts connections reopened after a server close or an
	// error.
	Reconnects int64 `json:"reconnects"`
	// Retries counts requests resent because the server never processed
	// them (HTTP/2 GOAWAY).
	Retries int64 `json:"retries"`
	// Redirects counts the redirect hops followed (--max-redirects): the
	// requests the server received beyond each exchange's first, so that
	// Requests + error total + Redirects adds up with its access log.
	Redirects int64 `json:"redirects"`
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
	// HandshakeLatencyUs summarizes, for a connection-rate run (--cps),
	// every connection's handshake latency in µs: from its intended start
	// (its ticket's time) to its TLS handshake's end (its connect's end in
	// clear text), so a late start is in it (no coordinated omission),
	// with --requests-per-connection 0 too; TLSHandshake*Us time the
	// handshake alone, from its actual start. Absent otherwise.
	HandshakeLatencyUs *hist.Summary `json:"handshake_latency_us,omitempty"`
	// TLS counts negotiated parameters per connection.
	TLS TLSCounts `json:"tls"`
	// MaxStreams is the effective concurrent streams per HTTP/2 connection
	// (the plan's, capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS);
	// 0 for HTTP/1.1.
	MaxStreams int32 `json:"h2_max_streams,omitempty"`
	// HTTP3 is set when the run spoke HTTP/3 over QUIC: Connect is then
	// not measured (QUIC's handshake opens the connection), and
	// HeaderBytes and the framing are not counted (BytesRead is the
	// bodies').
	HTTP3 bool `json:"http3,omitempty"`
	// HeaderBytes and BodyBytes split completed responses' BytesRead
	// (h2load's "traffic: headers, data"): header sections as on the wire
	// (HTTP/2: HPACK-compressed HEADERS frames), bodies as received, still
	// content-encoded; the rest is framing.
	HeaderBytes int64 `json:"header_bytes"`
	BodyBytes   int64 `json:"body_bytes"`
	// HeaderFieldBytes is the header sections decoded (HTTP/2: fields'
	// names and values; HTTP/1.1: HeaderBytes), h2load's base for "space
	// savings".
	HeaderFieldBytes int64 `json:"header_field_bytes"`
	// ContentEncoding maps each Content-Encoding seen ("identity" when
	// absent, "gzip", "br", "deflate", "zstd", "compress", "other") to its
	// completed responses.
	ContentEncoding map[string]int64 `json:"content_encoding"`
	// WithinStdevPct is, per distribution, the share in percent of its
	// samples within its mean ± one standard deviation (wrk's "+/- Stdev",
	// h2load's "+/- sd"); 0 without samples.
	WithinStdevPct WithinStdev `json:"within_stdev_pct"`
	// ReqPerSec summarizes the per-agent request rate samples, agents being
	// Phalanx's threads: each agent's completed responses per second in
	// each interval (wrk samples each thread's rate every 100 ms; Phalanx's
	// interval is --interval, 1 s by default). Without agent rows (the
	// coordinator was lost) a sample is an interval's rate over its agents.
	// Nil without samples.
	ReqPerSec *RateStats `json:"req_per_sec,omitempty"`
	// Mix reports each request of a mix apart, in mix order (a mix of 2 to
	// 16 requests; absent otherwise). MixAgents is the number of agents
	// it covers: fewer than AgentCount when an agent was lost or failed
	// before its end, whose requests are then only in the totals.
	Mix       []MixEntry `json:"mix,omitempty"`
	MixAgents int        `json:"mix_agents,omitempty"`
	// Warmup reports the warm-up, excluded from everything above; absent
	// without one.
	Warmup *Warmup `json:"warmup,omitempty"`
	// AgentRows has one row per agent.
	AgentRows []Agent `json:"agents"`
	// Provenance records what produced the run (plan hash, coordinator and
	// agent builds, hosts, pin maps, clocks); absent when the run carries
	// none.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// TimelinePoint is one interval of the window.
type TimelinePoint struct {
	Index     int32   `json:"index"`
	StartS    float64 `json:"start_s"`
	DurationS float64 `json:"duration_s"`
	Requests  int64   `json:"requests"`
	RPS       float64 `json:"rps"`
	Errors    int64   `json:"errors"`
	Missed    int64   `json:"missed"`
	TargetRPS float64 `json:"target_rps,omitempty"`
	// TargetConnections is the closed-loop connection target at the
	// interval's middle; in a Partial interval both targets are those of
	// the agents not lost. Agents counts the agents merged in it.
	TargetConnections float64   `json:"target_connections,omitempty"`
	Agents            int32     `json:"agents"`
	Partial           bool      `json:"partial,omitempty"`
	P50Us             int64     `json:"p50_us"`
	P90Us             int64     `json:"p90_us"`
	P99Us             int64     `json:"p99_us"`
	MaxUs             int64     `json:"max_us"`
	CPUBusy           []float64 `json:"cpu_busy"`
	// Connections is the number of connections opened in the interval
	// and CPS its rate (connections/s; the achieved rate of a
	// connection-rate run); AgentCPS is each agent's, in the order of
	// agents.
	Connections int64     `json:"connections"`
	CPS         float64   `json:"cps"`
	AgentCPS    []float64 `json:"agent_cps,omitempty"`
	// LatenessP99Us is the interval's send lateness p99 (open loop; absent
	// in closed loop).
	LatenessP99Us int64 `json:"lateness_p99_us,omitempty"`
	// GrowthRefused is the interval's sends found late at the connection
	// cap (Report.GrowthRefused), by when they were found.
	GrowthRefused int64 `json:"growth_refused,omitempty"`
	// Backlogged is the interval's sends late for a busy connection
	// (Report.Backlogged), by when they ended.
	Backlogged int64 `json:"backlogged,omitempty"`
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
	// this stage's schedule, µs, for stages after the first: open loop,
	// each agent's first send scheduled in it; closed loop, its first
	// connection the stage's rising target activated (none for a stage
	// that holds or lowers the connections).
	ChangeSkewUs float64 `json:"change_skew_us"`
}

// WithinStdev is, per distribution of a Report, the percentage of its
// samples within mean ± stdev.
type WithinStdev struct {
	Latency float64 `json:"latency"`
	Service float64 `json:"service_time"`
	Connect float64 `json:"connect"`
	TTFB    float64 `json:"ttfb"`
}

// RateStats summarizes request rate samples, requests per second: wrk's
// "Req/Sec" row (Stdev is the sample standard deviation, n-1, as wrk's
// stats_stdev).
type RateStats struct {
	Samples        int     `json:"samples"`
	Min            float64 `json:"min"`
	Mean           float64 `json:"mean"`
	Stdev          float64 `json:"stdev"`
	Max            float64 `json:"max"`
	WithinStdevPct float64 `json:"within_stdev_pct"`
}

// MixEntry is one request of a mix: its method and URL, its completed
// responses by status, its failed requests by error kind, and their
// latency (as Report.Latency; nil without a completed response).
type MixEntry struct {
	Index    int              `json:"index"`
	Method   string           `json:"method"`
	URL      string           `json:"url"`
	Requests int64            `json:"requests"`
	Status   map[string]int64 `json:"status"`
	Errors   map[string]int64 `json:"errors"`
	Latency  *hist.Summary    `json:"latency_us"`
}

// Handshakes counts TLS handshakes by kind.
type Handshakes struct {
	Full    int64 `json:"full"`
	Resumed int64 `json:"resumed"`
	// Refused counts the full handshakes (among Full) that offered a
	// cached session the server did not resume.
	Refused int64 `json:"refused"`
	// Offered counts the handshakes that offered a cached session (omitted when 0)
	// (Resumed + Refused).
	Offered int64 `json:"offered,omitempty"`
	// ResumeRatioPlanned is the plan's --resume-ratio (omitted without
	// one); ResumeRatioOffered the share of all handshakes that actually
	// offered a session (Offered over Full + Resumed; set with a planned
	// ratio, 0 included: a keep-alive closed loop offers none, having no
	// reconnect); ResumeRatioAchieved the resumed share of all handshakes.
	ResumeRatioPlanned  float64  `json:"resume_ratio_planned,omitempty"`
	ResumeRatioOffered  *float64 `json:"resume_ratio_offered,omitempty"`
	ResumeRatioAchieved float64  `json:"resume_ratio_achieved"`
	// EarlyOffered counts the HTTP/3 handshakes that sent their first
	// request in 0-RTT (--early-data), EarlyAccepted those whose server
	// accepted it (among Resumed), EarlyRejected the difference (each
	// request sent again on a new connection, counted once); all omitted
	// when none was offered.
	EarlyOffered  int64 `json:"early_offered,omitempty"`
	EarlyAccepted int64 `json:"early_accepted,omitempty"`
	EarlyRejected int64 `json:"early_rejected,omitempty"`
}

// TLSCounts counts connections by negotiated TLS parameter.
type TLSCounts struct {
	Version map[string]int64 `json:"version"`
	Cipher  map[string]int64 `json:"cipher"`
	Group   map[string]int64 `json:"group"`
	ALPN    map[string]int64 `json:"alpn"`
	// Transport counts QUIC connections by QUIC version ("QUIC v1"):
	// empty over TCP.
	Transport map[string]int64 `json:"transport,omitempty"`
}

// Warmup is the warm-up's outcomes.
type Warmup struct {
	DurationS float64          `json:"duration_s"`
	Requests  int64            `json:"requests"`
	Status    map[string]int64 `json:"status"`
	Errors    map[string]int64 `json:"errors"`
}

// Agent is one agent's row. Connections is its part of the plan's
// connections, or at a connection rate of its cap on connections open at
// once (--max-open).
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
	// CPUWait is the agent's run-queue delay (its threads runnable but
	// waiting for a CPU, summed) over the window times its usable CPUs:
	// seconds per second per CPU, above 1 when more threads were
	// runnable than there were CPUs; CPUWaitS the delay in seconds.
	CPUWait  float64 `json:"cpu_wait"`
	CPUWaitS float64 `json:"cpu_wait_s"`
	CPUs     int32   `json:"cpus"`
	// CPUList is the agent's pin map (taskset -c syntax); empty when the
	// agent was not pinned.
	CPUList string `json:"cpu_list,omitempty"`
	Missed  int64  `json:"missed"`
	// ClientLate counts its open-loop sends late by its own delay
	// (Report.ClientLate). Omitted when 0.
	ClientLate    int64   `json:"client_late,omitempty"`
	ClockOffsetUs float64 `json:"clock_offset_us"`
	RTTUs         float64 `json:"rtt_us"`
	// StartOffsetUs is the agent's first send minus the start instant;
	// StartOffsetUnknown is set (and StartOffsetUs 0) when it is not
	// known: the agent sent nothing, or failed before its end.
	StartOffsetUs      float64 `json:"start_offset_us"`
	StartOffsetUnknown bool    `json:"start_offset_unknown,omitempty"`
	// Error says why the agent's share ended early; its measurements up to
	// then are included.
	Error string `json:"error,omitempty"`
	// RanS is how long its load ran as far as the report holds it, from
	// the window's start (its own window: in count mode or after a stop,
	// to its last response's end; lost, to its last interval's end), and
	// its RPS and CPU are over it; 0 when not known (then over the run's
	// window). Lost is set when the run lost the agent after the start,
	// and LostAtS is when it was lost.
	Lost    bool    `json:"lost,omitempty"`
	LostAtS float64 `json:"lost_at_s,omitempty"`
	RanS    float64 `json:"ran_s,omitempty"`
}

// LostAgent is an agent the run lost after its start: when (seconds from
// the window's start), how (Error names it), and its share of the load.
type LostAgent struct {
	Name        string  `json:"name"`
	LostAtS     float64 `json:"lost_at_s"`
	RanS        float64 `json:"ran_s"`
	Error       string  `json:"error"`
	Connections int64   `json:"connections"`
	Rate        int64   `json:"rate,omitempty"`
}

// How returns how the agent was lost: Error without its leading "agent
// NAME: ".
func (l LostAgent) How() string {
	return strings.TrimPrefix(l.Error, "agent "+l.Name+": ")
}

// ErrorTotal returns the number of failed requests.
func (r *Report) ErrorTotal() int64 { return sum(r.Errors) }

// ConnectionRate is a connection-rate run's figures (coordctl's --cps).
type ConnectionRate struct {
	// TargetCPS is the target in new connections/s across the cluster
	// (with stages, the window's mean); CPS the achieved rate: Connections,
	// those opened in the window (the timeline's sum), over the window.
	TargetCPS   float64 `json:"target_cps"`
	CPS         float64 `json:"cps"`
	Connections int64   `json:"connections"`
	// RequestsPerConnection is what each connection sent before it
	// closed (0: the handshake only).
	RequestsPerConnection int `json:"requests_per_connection"`
	// MaxOpen is the cap on connections open at once across the cluster
	// (--max-open, or its default); 0 when unknown (a run stored before
	// it was reported).
	MaxOpen int64 `json:"max_open,omitempty"`
}

package plan

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by (*Plan).SetDefaults; they follow wrk where wrk has one.
const (
	DefaultMethod      = "GET"
	DefaultConnections = 10
	DefaultDuration    = 10 * time.Second
	DefaultTimeout     = 2 * time.Second // wrk's --timeout default
	// MaxPacingWindow bounds PacingWindow: a longer window would make the
	// schedule's bunches, not the server, the latency measured.
	MaxPacingWindow = 10 * time.Millisecond
	// SpinLead bounds how early PacingSpin ends a send's timer wait,
	// and so the CPU it spins per send.
	SpinLead        = 100 * time.Microsecond
	DefaultInterval = time.Second
	// MaxRunLength bounds duration+timeout so that every latency fits the
	// histogram range (internal/hist.HighestUs is 24 h).
	MaxRunLength = 23 * time.Hour
	// MinInterval is the shortest reporting interval accepted.
	MinInterval = 100 * time.Millisecond
)

// Plan is the whole test as the user asked for it.
type Plan struct {
	// URL is the target: an absolute http:// or https:// URL.
	URL string
	// Method is the request method; default GET.
	Method string
	// Headers are sent with every request, in order. A Host header
	// overrides the URL's host.
	Headers []Header
	// Body is sent with every request.
	Body []byte
	// Connections is the total across the cluster; default 10.
	Connections int
	// Duration is the measurement window; default 10 s.
	Duration time.Duration
	// Timeout bounds each request from its send to its last body byte;
	// default 2 s.
	Timeout time.Duration
	// Interval is the reporting interval; default 1 s.
	Interval time.Duration
	// Agents is the number of agents to use; 0 means every live agent.
	Agents int
	// TLS configures the client side of TLS.
	TLS TLS

	// Requests, when above 0, is the exact number of requests to issue
	// across the cluster (count mode, httpress's and h2load's -n); the run
	// ends when they have all ended, or at Duration if that comes first.
	// With Requests set and Duration zero, only the count ends the run.
	Requests int64
	// Warmup is load before the measurement window, excluded from its
	// counts, RPS and percentiles and reported on its own. Default 0.
	Warmup time.Duration
	// NoKeepAlive sends one request per connection: one TCP connect and one
	// TLS handshake per request (httpress without -k).
	NoKeepAlive bool
	// Protocol is the HTTP version spoken: H1 (the default), H2 (with up
	// to MaxStreams concurrent streams per connection: over TLS negotiated
	// by ALPN h2; on an http:// URL h2c with prior knowledge, RFC 9113
	// section 3.3, as h2load does) or H3 (HTTP/3 over QUIC, https only,
	// up to MaxStreams request streams at once per connection).
	Protocol Protocol
	// MaxStreams is h2load's -m: concurrent streams per HTTP/2 connection
	// (the server's SETTINGS_MAX_CONCURRENT_STREAMS caps it) or per HTTP/3
	// connection (the server's QUIC stream limit makes the rest wait).
	// Default 1; above 1 not with H1, NoKeepAlive or ConnectionRate.
	MaxStreams int
	// ConnectTo is a host:port to dial instead of the URL's, keeping the
	// URL's name for Host and SNI (h2load's and curl's --connect-to).
	ConnectTo string
	// Resolver is a DNS server host:port used to resolve the target once
	// per agent; default the system resolver.
	Resolver string
	// Mix, when not empty, is the request mix: each connection cycles
	// through the requests in proportion to their weights. Every entry
	// must target the URL's scheme, host and port.
	Mix []Request

	// Load is the load model: ClosedLoop (the zero value: Connections
	// each send their next request when the last one ends) or OpenLoop
	// (sends follow a schedule at Rate). It is chosen explicitly; the YAML
	// file and coordctl's flags choose it from the fields set (LoadFor).
	Load Load
	// Rate is the open-loop target (wrk2's -R): requests are sent on a
	// schedule at this total rate across the cluster, in requests/s, and
	// latency runs from each request's intended send time. Zero in closed
	// loop; in open loop it may be zero only when the first stage ramps
	// from it.
	Rate int64
	// PacingWindow, in open loop, rounds each request's intended send
	// time down to a multiple of the window from the start instant
	// (coordctl's --pacing-window, the file's pacing_window), so that the
	// requests due within one window leave together on one timer wake-up,
	// as h2load's and wrk2's event loops do (libev and ae wake on a 1-ms
	// timer). The rate is unchanged; sends are bunched. Latency and send
	// lateness run from the rounded times, the instants actually
	// scheduled, and the report states the window. Zero, the default,
	// schedules every request at its own instant (the precise pacing);
	// at most MaxPacingWindow; open loop only.
	PacingWindow time.Duration
	// PacingSpin, in open loop, ends each send's timer wait early by the
	// worker's running mean of its timer wake-ups' delay (at most
	// SpinLead) and spins, yielding the processor to other goroutines,
	// to the intended instant (coordctl's --pacing-spin, the file's
	// pacing_spin): the send lateness then holds the spin's few
	// microseconds instead of the timer wake-up's tens, for the CPU of
	// the spin (1.14-1.25 times the agent's CPU per request at 2,000
	// and 20,000/s; README, Performance). Linux agents; elsewhere sends wait on Go timers
	// whatever this says. Default false; open loop only; with
	// PacingWindow the spin ends at each window's instant.
	PacingSpin bool
	// MaxConnections caps the connections an open-loop run may open when
	// every connection is busy; default Connections (no growth). With
	// ConnectionRate it is the cap on connections open at once
	// (coordctl's --max-open, the file's max_open), default the larger of
	// Connections and the highest rate (connections/s) of the plan and its
	// stages.
	MaxConnections int
	// ConnectionRate makes an open-loop plan's Rate (and its stages'
	// rates) new connections per second across the cluster instead of
	// requests (coordctl's --cps; the TLS-handshake benchmark of QAT's and
	// KAE's guides, h2load's -r): each ticket opens a connection at its
	// intended time, sends RequestsPerConnection requests back to back
	// and closes it. HTTP/1.1 and HTTP/3 only; not with Requests or NoKeepAlive.
	ConnectionRate bool
	// RequestsPerConnection is what each connection of a ConnectionRate
	// plan sends before it closes: 0 is the handshake only. Zero and
	// unused otherwise; coordctl's default is 1.
	RequestsPerConnection int
	// CloseReset closes every connection with a TCP reset (SO_LINGER 0)
	// instead of a FIN, as tls-perf does: the client keeps no TIME_WAIT
	// socket, so its ephemeral ports are free again at once (coordctl's
	// --close rst; default false, --close fin).
	CloseReset bool
	// MaxRedirects is how many redirect hops a request follows (coordctl's
	// --max-redirects; at most MaxRedirectHops): a response of status 301,
	// 302, 303, 307 or 308 with a Location on the same origin (scheme, host
	// and port of the request's URL) is followed on the same connection
	// slot, 303 (and 301/302 of a POST) as GET without a body, as browsers
	// and curl -L do (HTTP/1.1, HTTP/2 and HTTP/3); the exchange is timed once, from the first request's
	// start to the final response's last byte. 0, the default, takes a 3xx
	// as the response, as wrk does.
	MaxRedirects int
	// SourceIPs, when not empty, are local addresses that each agent binds
	// its outgoing connections to, round-robin per worker (coordctl's
	// --source-ips), so that one agent holds more than one address's
	// ephemeral ports. Each must be an IP literal of the target's family;
	// the engine refuses one that is not an address of the agent's host.
	SourceIPs []string
	// Stages ramp the target linearly, as k6's: Rate in open loop,
	// Connections in closed loop, each from the previous stage's target
	// (the first from the plan's Rate or Connections). Their durations add
	// up to the window (Duration, if set, must equal the sum) and must be
	// multiples of Interval. StageSpans gives their offsets and targets.
	Stages []Stage

	// OnAgentLoss is what the run does when it loses an agent after its
	// start (the agent's stream ends, or it is silent past the bound in
	// docs/design.md): AbortOnLoss (the zero value and default) ends every
	// other agent's window at once; ContinueOnLoss lets them finish.
	OnAgentLoss LossPolicy
}

// LossPolicy is what a run does when it loses an agent mid-run.
type LossPolicy uint8

const (
	// AbortOnLoss ends every other agent's window at once, as a stop does:
	// the result covers the window up to the loss, marked.
	AbortOnLoss LossPolicy = iota
	// ContinueOnLoss lets the other agents run their shares to the end:
	// the intervals after the loss are marked partial.
	ContinueOnLoss
)

// LossPolicies are the accepted spellings of a LossPolicy, in order.
var LossPolicies = []string{"abort", "continue"}

// String returns "abort" or "continue" (or "loss-policy(N)" for an
// unknown value).
func (l LossPolicy) String() string {
	if int(l) < len(LossPolicies) {
		return LossPolicies[l]
	}
	return fmt.Sprintf("loss-policy(%d)", uint8(l))
}

// ParseLossPolicy parses "abort" or "continue". Errors say what is
// accepted.
func ParseLossPolicy(s string) (LossPolicy, error) {
	for i, name := range LossPolicies {
		if s == name {
			return LossPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("want abort or continue, got %q", s)
}

// Protocol is the HTTP version a plan speaks.
type Protocol uint8

const (
	// H1 is HTTP/1.1, over TLS or clear text.
	H1 Protocol = iota
	// H2 is HTTP/2: over TLS, negotiated by ALPN h2; in clear text (an
	// http:// URL), h2c with prior knowledge.
	H2
	// H3 is HTTP/3 (RFC 9114) over QUIC version 1 (RFC 9000) with TLS 1.3
	// (RFC 9001), ALPN h3, on UDP to the URL's port: https only.
	H3
)

// String returns "h1" or "h2" (or "protocol(N)" for an unknown value).
func (p Protocol) String() string {
	switch p {
	case H1:
		return "h1"
	case H2:
		return "h2"
	case H3:
		return "h3"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// Load is a plan's load model.
type Load uint8

const (
	// ClosedLoop keeps a fixed number of connections (ramped by stages),
	// each sending its next request when the previous one ends.
	ClosedLoop Load = iota
	// OpenLoop sends requests on a schedule at a rate (ramped by stages),
	// opening connections up to MaxConnections when all are busy.
	OpenLoop
)

// String returns "closed" or "open" (or "load(N)" for an unknown value).
func (l Load) String() string {
	switch l {
	case ClosedLoop:
		return "closed"
	case OpenLoop:
		return "open"
	}
	return fmt.Sprintf("load(%d)", uint8(l))
}

// LoadFor returns the load model that the user-facing plan forms (the YAML
// plan file and coordctl's flags, docs/plan.md) select from the fields set:
// open loop when rate, or the first stage's rate, is above 0; closed loop
// otherwise. Go callers set Plan.Load directly.
func LoadFor(rate int64, stages []Stage) Load {
	if rate > 0 || (len(stages) > 0 && stages[0].Rate > 0) {
		return OpenLoop
	}
	return ClosedLoop
}

// Stage is one ramp segment of a plan.
type Stage struct {
	// Duration is the stage's length.
	Duration time.Duration
	// Rate is the open-loop target at the stage's end, requests/s.
	Rate int64
	// Connections is the closed-loop target at the stage's end.
	Connections int
}

// OpenLoop reports whether the plan's load model is OpenLoop.
func (p *Plan) OpenLoop() bool { return p.Load == OpenLoop }

// Request is one entry of a request mix.
type Request struct {
	// Method is the request method; default GET.
	Method string
	// URL is the absolute URL; its scheme, host and port must be the plan's.
	URL string
	// Headers are added to the plan's headers (same name: this one wins).
	Headers []Header
	// Body is sent with the request.
	Body []byte
	// Weight is the request's share of the mix; default 1.
	Weight int
}

// Header is one request header field.
type Header struct {
	Name, Value string
}

// TLS configures the client side of TLS. Names are validated by
// ValidateTLS; see tlsnames.go for the accepted spellings.
type TLS struct {
	// Insecure skips certificate verification. Default false.
	Insecure bool
	// CAPEM holds PEM CA certificates trusted besides the system pool.
	CAPEM []byte
	// CAFile names the file CAPEM was read from, as the user gave it
	// (coordctl's --cacert, a plan file's tls.ca_file), so that a failed
	// verification's hint names it; "" when CAPEM came from no file.
	CAFile string
	// CertPEM and KeyPEM are a client certificate and its key (PEM).
	CertPEM, KeyPEM []byte
	// ServerName is the SNI and verified name; default the URL's host,
	// with no SNI for an IP literal (RFC 6066 section 3).
	ServerName string
	// MinVersion and MaxVersion bound the protocol: "1.0", "1.1", "1.2" or
	// "1.3". Default 1.2 to 1.3.
	MinVersion, MaxVersion string
	// Ciphers restricts the TLS 1.2 and lower cipher suites, by IANA or
	// OpenSSL name (TLS 1.3 suites are not configurable in crypto/tls).
	Ciphers []string
	// Curves restricts and orders the key exchange groups: X25519, P-256,
	// P-384, P-521, X25519MLKEM768.
	Curves []string
	// ALPN is the list of protocols offered; default http/1.1, h2 with
	// protocol H2, h3 with H3.
	ALPN []string
	// Resume turns on session resumption (a session cache per worker: TLS
	// 1.3 tickets, TLS 1.2 tickets). Off by default, so short connections
	// measure full handshakes.
	Resume bool
	// ResumeRatio, with Resume, is the fraction of handshakes that offer
	// a session from the worker's cache (coordctl's --resume-ratio), the
	// others full: handshake n of a worker offers one when
	// floor((n+1)·R) > floor(n·R), so any run of handshakes holds R of
	// them to within one. 0 (the default) offers a session whenever the
	// cache has one; 0 < R <= 1 otherwise.
	ResumeRatio float64
	// EarlyData, with protocol H3 and Resume, sends the first request of
	// each HTTP/3 connection that offers a cached session in 0-RTT (TLS
	// 1.3 early data, RFC 8446 section 2.3; QUIC 0-RTT, RFC 9001 section
	// 4.6; coordctl's --early-data), before the handshake completes.
	// Early data can be replayed, so only GET and HEAD requests (RFC 8470
	// section 2.1, RFC 9114 section 10.9) may go in it: a plan with any
	// other method is refused. A rejected 0-RTT request is sent again,
	// once, on a new connection without 0-RTT. Off by default.
	EarlyData bool
}

// SetDefaults fills zero fields with their defaults.
func (p *Plan) SetDefaults() {
	if p.Method == "" {
		p.Method = DefaultMethod
	}
	if p.Connections == 0 {
		p.Connections = DefaultConnections
	}
	p.setDurationDefault()
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Interval == 0 {
		p.Interval = DefaultInterval
	}
	if p.MaxStreams == 0 {
		p.MaxStreams = 1
	}
	if p.MaxConnections == 0 {
		p.MaxConnections = p.Connections
		if p.ConnectionRate {
			p.MaxConnections = p.defaultMaxOpen()
		}
	}
	for i := range p.Mix {
		if p.Mix[i].Method == "" {
			p.Mix[i].Method = DefaultMethod
		}
		if p.Mix[i].Weight == 0 {
			p.Mix[i].Weight = 1
		}
	}
}

// setDurationDefault defaults the duration, except in count mode
// (Requests > 0), where the count ends the run.
func (p *Plan) setDurationDefault() {
	if len(p.Stages) > 0 && p.Duration == 0 {
		for _, s := range p.Stages {
			p.Duration += s.Duration
		}
	}
	if p.Duration == 0 && p.Requests == 0 {
		p.Duration = DefaultDuration
	}
}

// FieldError is a validation error that names the field, the bad value and
// what is allowed.
type FieldError struct {
	Field, Value, Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("plan: %s = %s: %s", e.Field, e.Value, e.Allowed)
}

// Validate checks p after SetDefaults. It returns every problem found,
// joined (errors.Join of *FieldError).
func (p *Plan) Validate() error {
	_, err := p.Check()
	return err
}

// Parsed is what Check parsed from a valid plan, so that no caller parses
// a URL again.
type Parsed struct {
	// Target is the plan's URL.
	Target Target
	// Entries are the targets of the requests Entries returns, in order:
	// the mix's URLs, or Target alone.
	Entries []Target
}

// Check is Validate that also returns what it parsed: the URL (and each
// mix URL) is parsed once, here, and callers (the engine, coordctl) use the
// result. Parsed is zero when the error is not nil.
func (p *Plan) Check() (Parsed, error) {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	t, terr := ParseTarget(p.URL)
	if terr != nil {
		bad("url", fmt.Sprintf("%q", redactURL(p.URL)), terr.Error())
	}
	if !validToken(p.Method) {
		bad("method", fmt.Sprintf("%q", p.Method), "want an HTTP method token such as GET, POST, HEAD")
	}
	errs = append(errs, headerErrors("headers", p.Headers)...)
	if p.Connections < 1 {
		bad("connections", fmt.Sprint(p.Connections), "want at least 1")
	}
	if p.Duration < 0 || (p.Duration == 0 && p.Requests <= 0) {
		bad("duration", p.Duration.String(), "want more than 0, e.g. 10s or 1m (or a request count)")
	}
	if p.Requests < 0 {
		bad("requests", fmt.Sprint(p.Requests), "want 0 (duration mode) or more")
	}
	if p.Requests > 0 && p.Connections >= 1 && p.Requests < int64(p.Connections) {
		bad("requests", fmt.Sprint(p.Requests), fmt.Sprintf("want at least connections (%d)", p.Connections))
	}
	if p.Warmup < 0 {
		bad("warmup", p.Warmup.String(), "want 0 or more")
	}
	if p.MaxStreams < 1 || p.MaxStreams > 1<<16 {
		bad("max_streams", fmt.Sprint(p.MaxStreams), "want 1 to 65536")
	}
	switch p.Protocol {
	case H1:
	case H2: // over TLS with ALPN h2, or h2c with prior knowledge on http://
	case H3: // over QUIC: validateHTTP3
	default:
		bad("protocol", p.Protocol.String(), "want h1, h2 or h3")
	}
	if p.MaxStreams > 1 && p.Protocol == H1 {
		bad("max_streams", fmt.Sprint(p.MaxStreams), "concurrent streams need http2 (--http2)")
	}
	for _, hp := range []struct{ field, v string }{{"connect_to", p.ConnectTo}, {"resolver", p.Resolver}} {
		if hp.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(hp.v); err != nil || port == "" {
			bad(hp.field, fmt.Sprintf("%q", hp.v), "want HOST:PORT")
		}
	}
	entries := []Target{t}
	if terr == nil && len(p.Mix) > 0 {
		var mixErrs []error
		entries, mixErrs = p.validateMix(t)
		errs = append(errs, mixErrs...)
	}
	errs = append(errs, p.validateLoad()...)
	if terr == nil {
		errs = append(errs, p.ineffectiveLoad(t)...)
	}
	errs = append(errs, p.TLS.validate(p.Protocol == H2)...)
	errs = append(errs, p.validateHTTP3(t, terr == nil)...)
	if p.Timeout <= 0 {
		bad("timeout", p.Timeout.String(), "want more than 0, e.g. 2s")
	}
	if p.Warmup+p.Duration+p.Timeout > MaxRunLength {
		bad("duration", p.Duration.String(), fmt.Sprintf("warmup + duration + timeout must be at most %v", MaxRunLength))
	}
	if p.Interval < MinInterval {
		bad("interval", p.Interval.String(), fmt.Sprintf("want at least %v", MinInterval))
	}
	if p.Agents < 0 {
		bad("agents", fmt.Sprint(p.Agents), "want 0 (all live agents) or more")
	}
	if p.OnAgentLoss > ContinueOnLoss {
		bad("on_agent_loss", p.OnAgentLoss.String(), "want abort or continue")
	}
	if p.Agents > 0 && p.Connections >= 1 && p.Agents > p.Connections {
		bad("agents", fmt.Sprint(p.Agents), fmt.Sprintf("want at most connections (%d): every agent needs a connection", p.Connections))
	}
	if len(errs) > 0 {
		return Parsed{}, errors.Join(errs...)
	}
	return Parsed{Target: t, Entries: entries}, nil
}

// Target is a parsed target URL.
type Target struct {
	// TLS is true for https.
	TLS bool
	// Host is the host name or IP literal, without brackets.
	Host string
	// Port is the port, defaulted from the scheme.
	Port string
	// HostHeader is the Host header value (host, plus port when not the
	// scheme's default).
	HostHeader string
	// RequestURI is the path and query sent in the request line.
	RequestURI string
}

// ParseTarget parses an absolute http(s) URL. A URL without a scheme
// (wrk's users' host:port/path) is refused with the https one it may
// have meant.
func ParseTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if raw != "" && !strings.Contains(raw, "://") && (err != nil || u.Scheme == "" || u.Opaque != "") {
		// "127.0.0.1:8443" does not parse, "localhost:8443" parses as
		// scheme localhost, "example.test/x" has none; "https:/x" is left
		// to the checks below (no host).
		return Target{}, fmt.Errorf("no scheme: want an absolute URL such as %s (or http://)", redactURL("https://"+strings.TrimPrefix(raw, "//")))
	}
	if err != nil {
		return Target{}, fmt.Errorf("want an absolute URL such as https://host:port/path: %w", err)
	}
	var t Target
	switch u.Scheme {
	case "https":
		t.TLS, t.Port = true, "443"
	case "http":
		t.Port = "80"
	default:
		return Target{}, fmt.Errorf("scheme %q not supported: want https or http", u.Scheme)
	}
	if u.Hostname() == "" {
		return Target{}, errors.New("want a host, e.g. https://127.0.0.1:8443/")
	}
	if u.User != nil {
		return Target{}, errors.New("user info in the URL is not supported: send an Authorization header")
	}
	if strings.Contains(u.RawQuery, " ") {
		// The path's are escaped when sent (URL.RequestURI), the query's
		// would be sent raw and break the request line (RFC 3986 allows
		// none; url.Parse refuses control characters).
		return Target{}, errors.New("a space in the query: escape it as %20 or +")
	}
	t.Host = u.Hostname()
	t.HostHeader = u.Host
	if p := u.Port(); p != "" {
		t.Port = p
		if p == map[bool]string{true: "443", false: "80"}[t.TLS] {
			t.HostHeader = strings.TrimSuffix(u.Host, ":"+p)
		}
	}
	if _, err := net.LookupPort("tcp", t.Port); err != nil {
		return Target{}, fmt.Errorf("bad port %q", t.Port)
	}
	t.RequestURI = u.RequestURI()
	return t, nil
}

// headerErrors checks headers hs (the plan's or a mix request's, named
// field): a token name and no line break in the value. Each error quotes
// the header with a credential's value redacted (redactHeader).
func headerErrors(field string, hs []Header) []error {
	var errs []error
	for i, h := range hs {
		if !validToken(h.Name) || strings.ContainsAny(h.Value, "\r\n") {
			errs = append(errs, &FieldError{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q: %q", h.Name, redactHeader(h).Value),
				"want 'Name: value' with a token name and no line breaks"})
		}
	}
	return errs
}

// validToken reports whether s is an RFC 9110 token (method, header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// validateMix checks the request mix against the plan's target, base, and
// returns each entry's parsed target.
func (p *Plan) validateMix(base Target) ([]Target, []error) {
	var errs []error
	targets := make([]Target, len(p.Mix))
	for i, r := range p.Mix {
		field := fmt.Sprintf("mix[%d]", i)
		t, err := ParseTarget(r.URL)
		targets[i] = t
		switch {
		case err != nil:
			errs = append(errs, &FieldError{field + ".url", fmt.Sprintf("%q", r.URL), err.Error()})
		case t.TLS != base.TLS || t.Host != base.Host || t.Port != base.Port:
			errs = append(errs, &FieldError{field + ".url", fmt.Sprintf("%q", r.URL), fmt.Sprintf("every request must target %s (the plan's scheme, host and port)", p.URL)})
		}
		if !validToken(r.Method) {
			errs = append(errs, &FieldError{field + ".method", fmt.Sprintf("%q", r.Method), "want an HTTP method token"})
		}
		if r.Weight < 1 || r.Weight > 1_000_000 {
			errs = append(errs, &FieldError{field + ".weight", fmt.Sprint(r.Weight), "want 1 to 1000000"})
		}
		errs = append(errs, headerErrors(field+".headers", r.Headers)...)
	}
	if len(p.Mix) > MaxMixRequests {
		errs = append(errs, &FieldError{"mix", fmt.Sprintf("%d requests", len(p.Mix)), fmt.Sprintf("want at most %d", MaxMixRequests)})
	} else if n, period := int64(len(p.Mix)), int64(sum(RoundRobinWeights(p.Mix))); period > MaxMixPeriod {
		errs = append(errs, &FieldError{"mix", fmt.Sprintf("weights summing to %d (over their common divisor)", period), fmt.Sprintf("want at most %d", MaxMixPeriod)})
	} else if period > n && n*period > MaxMixWork {
		errs = append(errs, &FieldError{"mix", fmt.Sprintf("%d requests with weights summing to %d (over their common divisor)", n, period),
			fmt.Sprintf("requests × weight sum must be at most %d: each agent orders the mix by smooth weighted round-robin at prepare, one step per request and weight (equal weights cost nothing)", int64(MaxMixWork))})
	}
	return targets, errs
}

// Bounds of a request mix, so that an agent orders it in well under a
// second at prepare.
const (
	// MaxMixRequests bounds a mix's requests.
	MaxMixRequests = 1 << 16
	// MaxMixPeriod bounds the sum of a mix's RoundRobinWeights: the
	// length of the order each connection cycles through.
	MaxMixPeriod = 1 << 20
	// MaxMixWork bounds a mix's requests times the sum of its
	// RoundRobinWeights (the steps of the smooth weighted round-robin
	// order, about 0.1 s at the bound), unless all its weights are equal.
	MaxMixWork = 1 << 26
)

// RoundRobinWeights returns the mix's weights (below 1 counting as 1)
// divided by their greatest common divisor: the smooth weighted
// round-robin order over them is the order over the weights themselves,
// with the shortest period (their sum).
func RoundRobinWeights(mix []Request) []int {
	out := make([]int, len(mix))
	g := 0
	for i, r := range mix {
		out[i] = max(r.Weight, 1)
		g = gcd(g, out[i])
	}
	for i := range out {
		out[i] /= g
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// Entries returns the requests the plan sends: its mix, or the one request
// described by URL, Method, Headers and Body. Mix entries carry the plan's
// headers followed by their own.
func (p *Plan) Entries() []Request {
	if len(p.Mix) == 0 {
		return []Request{{Method: p.Method, URL: p.URL, Headers: p.Headers, Body: p.Body, Weight: 1}}
	}
	out := make([]Request, len(p.Mix))
	for i, r := range p.Mix {
		r.Headers = append(append([]Header(nil), p.Headers...), r.Headers...)
		out[i] = r
	}
	return out
}

// validateLoad checks rate, connection cap and stages.
func (p *Plan) validateLoad() []error {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	switch {
	case p.Rate < 0:
		bad("rate", fmt.Sprint(p.Rate), "want a rate above 0 requests/s, or 0 for closed loop")
	case p.Load == ClosedLoop && p.Rate > 0:
		bad("rate", fmt.Sprint(p.Rate), "a closed-loop plan has no rate: choose open loop to send at a rate")
	case p.Load == OpenLoop && p.Rate == 0 && (len(p.Stages) == 0 || p.Stages[0].Rate <= 0):
		bad("rate", "0", "an open-loop plan needs a rate above 0 requests/s (or a first stage that ramps to one)")
	case p.Load != ClosedLoop && p.Load != OpenLoop:
		bad("load", p.Load.String(), "want closed or open")
	}
	if p.MaxConnections < p.Connections {
		bad("max_connections", fmt.Sprint(p.MaxConnections), fmt.Sprintf("want at least connections (%d)", p.Connections))
	}
	if p.MaxConnections > p.Connections && !p.OpenLoop() {
		bad("max_connections", fmt.Sprint(p.MaxConnections), "only open-loop runs (rate) open connections beyond -c")
	}
	errs = append(errs, p.validateConnectionRate()...)
	errs = append(errs, p.validateRedirects()...)
	errs = append(errs, p.validatePacingWindow()...)
	if p.PacingSpin && !p.OpenLoop() {
		bad("pacing_spin", "true", "a closed-loop plan has no intended send times to spin to: give a rate, or drop the pacing spin")
	}
	if len(p.Stages) == 0 {
		return errs
	}
	open := p.OpenLoop()
	var total time.Duration
	for i, s := range p.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		if s.Duration <= 0 {
			bad(field+".duration", s.Duration.String(), "want more than 0")
		} else if p.Interval > 0 && s.Duration%p.Interval != 0 {
			bad(field+".duration", s.Duration.String(), fmt.Sprintf("want a multiple of the interval (%v), so intervals fall in one stage", p.Interval))
		}
		total += s.Duration
		switch {
		case open && s.Connections != 0:
			bad(field+".connections", fmt.Sprint(s.Connections), "an open-loop plan (rate) ramps rate, not connections")
		case open && s.Rate < 0:
			bad(field+".rate", fmt.Sprint(s.Rate), "want 0 or more requests/s")
		case !open && s.Rate != 0:
			bad(field+".rate", fmt.Sprint(s.Rate), "set the plan's rate (or the first stage's) to ramp rates; a closed-loop plan ramps connections")
		case !open && (s.Connections < 0 || s.Connections > p.MaxConnections && p.MaxConnections > p.Connections):
			bad(field+".connections", fmt.Sprint(s.Connections), "want 0 or more")
		}
	}
	if p.Duration != 0 && p.Duration != total {
		bad("duration", p.Duration.String(), fmt.Sprintf("want the stages' total (%v) or nothing", total))
	}
	if p.Requests > 0 {
		bad("requests", fmt.Sprint(p.Requests), "count mode does not combine with stages")
	}
	return errs
}

// windowDivisor returns the longest pacing window, up to PacingWindow,
// that divides the interval, warm-up and duration in whole microseconds
// (their greatest common divisor with the window): what a refused window's
// error suggests. 1µs when nothing longer divides them all.
func (p *Plan) windowDivisor() time.Duration {
	g := p.PacingWindow.Microseconds()
	for _, d := range []time.Duration{p.Interval, p.Warmup, p.Duration} {
		for n := d.Microseconds(); n != 0; {
			g, n = n, g%n
		}
	}
	return time.Duration(max(g, 1)) * time.Microsecond
}

// validatePacingWindow checks PacingWindow: open loop only, at most
// MaxPacingWindow, whole microseconds (the report's unit), and a divisor
// of the interval, warm-up and duration, so that the rounded send times
// fall in the same interval, phase and stage (stages are multiples of the
// interval) as the schedule's.
func (p *Plan) validatePacingWindow() []error {
	w := p.PacingWindow
	if w == 0 {
		return nil
	}
	bad := func(allowed string) []error {
		return []error{&FieldError{Field: "pacing_window", Value: w.String(), Allowed: allowed}}
	}
	switch {
	case w < 0 || w > MaxPacingWindow:
		return bad(fmt.Sprintf("want 0 (each request at its own instant, the default) up to %v, e.g. 1ms", MaxPacingWindow))
	case w%time.Microsecond != 0:
		return bad("want whole microseconds, e.g. 1ms or 500us")
	case !p.OpenLoop():
		return bad("a closed-loop plan has no schedule to bunch: give a rate, or drop the pacing window")
	case p.Interval > 0 && p.Interval%w != 0:
		return bad(fmt.Sprintf("want a divisor of the interval (%v), e.g. %v, so that rounded sends stay in their interval", p.Interval, p.windowDivisor()))
	case p.Warmup%w != 0:
		return bad(fmt.Sprintf("want a divisor of the warm-up (%v), e.g. %v", p.Warmup, p.windowDivisor()))
	case p.Duration%w != 0:
		return bad(fmt.Sprintf("want a divisor of the duration (%v), e.g. %v", p.Duration, p.windowDivisor()))
	}
	return nil
}

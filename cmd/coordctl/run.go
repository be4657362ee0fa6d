package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/daemon"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// runFlags are coordctl run's flags, named as wrk names them.
type runFlags struct {
	connections int
	duration    wrkDuration
	timeout     wrkDuration
	headers     []string
	method      string
	bodyFile    string
	latency     bool
	insecure    bool
	caFile      string
	agents      int
	jsonFile    string
	htmlFile    string

	requests     int64
	warmup       wrkDuration
	pacingWindow wrkDuration
	pacingSpin   bool
	noKeepAlive  bool
	http2        bool
	http3        bool
	maxStreams   int
	host         string
	connectTo    string
	resolver     string
	mixFile      string

	rate           int64
	maxConnections int
	interval       wrkDuration
	connRate       connRateFlags
	maxRedirects   int

	tlsResume bool
	earlyData bool
	tlsMin    string
	tlsMax    string
	ciphers   []string
	curves    []string
	sni       string
	certFile  string
	keyFile   string
	alpn      []string

	onAgentLoss string
	quiet       bool
	format      summaryFormat

	formats formatFlags
	opts    runOptions // thresholds and stored labels (runopts.go)
}

func newRunCmd(co *coordinatorFlags) *cobra.Command {
	f := runFlags{format: formatText, duration: wrkDuration(plan.DefaultDuration), timeout: wrkDuration(plan.DefaultTimeout), interval: wrkDuration(plan.DefaultInterval)}
	cmd := &cobra.Command{
		Use:   "run [flags] URL | PLAN.yaml [URL]",
		Short: "Run a load test against URL, or a plan file, on the cluster's agents",
		Example: `  coordctl run -c50 -d10s --latency https://127.0.0.1:8443/
  coordctl run -c 750 -d 1m -H 'Accept-Encoding: br' --json out.json https://target.example/
  coordctl run -R 20000 -c 200 -d 1m --latency https://target.example/
  coordctl run -R 5000 -d 10m --html report.html https://target.example/
  coordctl run plan.yaml -d 30s          # flags override the plan file's fields
  coordctl run plan.yaml https://127.0.0.1:8443/   # the plan against this URL (mix paths kept)`,
		Args: runArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.plan(cmd, args...)
			if err != nil {
				return err
			}
			if err := f.opts.check(cmd.Flags().Changed, len(p.Stages)); err != nil {
				return err
			}
			out, err := openOutput("--json", f.jsonFile)
			if err != nil {
				return err
			}
			defer out.discard()
			files, err := f.formats.open()
			if err != nil {
				return err
			}
			defer files.discard()
			htmlOut, err := openHTMLOutput(f.htmlFile)
			if err != nil {
				return err
			}
			defer htmlOut.discard()
			client, closeConn, err := co.dial()
			if err != nil {
				return err
			}
			defer closeConn()
			stderr := newProgressView(cmd.ErrOrStderr(), p, f.quiet)
			defer stderr.done()
			// Ctrl-C (or SIGTERM) once: stop the run early and report what
			// ran; twice: abandon it (see stopper).
			ctx, abandon := context.WithCancel(cmd.Context())
			defer abandon()
			st := newStopper(ctx, client, stderr, abandon)
			pp := wire.PlanToProto(p)
			rc := &received{agentIntervals: f.formats.agentIntervals()}
			sum := &summary{w: cmd.OutOrStdout(), format: f.format, latency: f.latency, p: p}
			if out.name == "-" {
				sum.format = "" // JSON alone on stdout
			}
			req := f.opts.request(pp)
			req.AgentIntervals = rc.agentIntervals
			res, err := submit(ctx, client, co.addr, req, stderr, func(id string) {
				st.setRunID(id)
				// The header waits for the first interval: a run that fails
				// while its agents connect prints its error alone, not a
				// "Running … test @" header for a test that never ran.
				if len(rc.points) > 0 {
					sum.accepted(rc.agents)
				}
			}, rc)
			st.close()
			stderr.done() // the report or an error follows
			if sig := st.abandonedBy(); sig != nil {
				return &exitError{abandonedStatus(sig), errors.New("run abandoned: its agents stop now, and nothing is reported")}
			}
			var lc *lostCoordinator
			if errors.As(err, &lc) {
				// Report what was received: nothing measured is lost.
				how := describe(lc.err)
				run, rerr := rc.run(pp, how)
				var rep *report.Report
				if rerr == nil {
					rep, rerr = report.Build(run)
				}
				if rerr != nil {
					return fmt.Errorf("%s; no partial report: %w", how, rerr)
				}
				if werr := writeReport(cmd, rep, sum, out); werr != nil {
					return werr
				}
				if werr := files.write(run); werr != nil {
					return werr
				}
				if werr := htmlOut.writeHTML(run, rep); werr != nil {
					return werr
				}
				return &exitError{exitCoordinatorLost, fmt.Errorf("%s: partial report of run %s from the %d intervals received (%.2fs)",
					how, rep.RunID, len(rep.Timeline), rep.DurationS)}
			}
			if err != nil {
				if st.stopping() && status.Code(err) == codes.Canceled {
					// Stopped before its start: nothing was measured.
					return &exitError{exitStoppedEarly, err}
				}
				return err
			}
			run, err := wire.RunFromProto(res)
			if err != nil {
				return err
			}
			rep, err := report.Build(run)
			if err != nil {
				return err
			}
			rep.Labels = report.Labels{Tags: f.opts.tags, Note: f.opts.note}
			if err := writeReport(cmd, rep, sum, out); err != nil {
				return err
			}
			if err := files.write(run); err != nil {
				return err
			}
			if err := htmlOut.writeHTML(run, rep); err != nil {
				return err
			}
			if rep.Partial {
				return &exitError{exitPartial, notWhole(rep)}
			}
			if err := thresholdsFailed(rep); err != nil {
				return err
			}
			if rep.StoppedEarly {
				return &exitError{exitStoppedEarly, fmt.Errorf("run %s stopped early: the report covers its first %.2fs", rep.RunID, rep.DurationS)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.IntVarP(&f.connections, "connections", "c", plan.DefaultConnections, "connections to keep open, total across all agents")
	fl.VarP(&f.duration, "duration", "d", "measurement window, e.g. 10s, 1m, or 30 (seconds)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	fl.Var(&f.timeout, "timeout", "per-request timeout, from the request's start (its write, or its connect when it opens one) to its last body byte")
	fl.StringVarP(&f.method, "method", "X", plan.DefaultMethod, "request method")
	fl.StringVar(&f.bodyFile, "body", "", "file whose content is sent as the request body")
	fl.BoolVar(&f.latency, "latency", false, "print the latency distribution (50/75/90/99/99.9/99.99 %)")
	fl.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification (verification is on by default)")
	fl.StringVar(&f.caFile, "cacert", "", "PEM file of CA certificates to trust besides the system pool")
	fl.IntVar(&f.agents, "agents", 0, "number of agents to use (default: all live agents)")
	fl.StringVar(&f.jsonFile, "json", "", "also write the report as JSON to this file ('-' for stdout)")
	fl.StringVar(&f.htmlFile, "html", "", "also write the report as one self-contained HTML page (timeline, percentile spectra, agents; opens offline) to this file")
	fl.Int64VarP(&f.requests, "requests", "n", 0, "count mode: exactly N requests across the cluster; with -d, whichever ends first")
	fl.Int64VarP(&f.rate, "rate", "R", 0, "open loop: total target rate in requests/s across the cluster (wrk2's -R); latency from each request's intended send time")
	fl.Var(&f.pacingWindow, "pacing-window", "open loop: round each intended send time down to a multiple of this window, e.g. 1ms, so sends due together leave on one timer wake-up (h2load's and wrk2's event loops tick at 1 ms); latency and lateness run from the rounded times; up to 10ms; 0 schedules each request at its own instant")
	fl.BoolVar(&f.pacingSpin, "pacing-spin", false, "open loop: end each send's timer wait up to 100us early and spin (yielding the CPU) to its intended time: send lateness of a few µs instead of the timer wake-up's tens, for 1.14-1.25 x the agent's CPU per request (Linux agents)")
	fl.IntVar(&f.maxConnections, "max-connections", 0, "open loop: connections the run may open when all are busy (default: -c)")
	f.connRate.register(fl)
	fl.IntVar(&f.maxRedirects, "max-redirects", 0, "redirect hops each request follows, same origin only (0: a 3xx is the response, as wrk); a loop or more hops is the redirect error")
	fl.Var(&f.interval, "interval", "reporting interval (timeline resolution), e.g. 1s, 100ms")
	fl.Var(&f.warmup, "warmup", "load before the window, excluded from the results and reported apart, e.g. 5s")
	fl.BoolVar(&f.noKeepAlive, "no-keepalive", false, "one request per connection: a TCP connect and TLS handshake per request (httpress without -k)")
	fl.BoolVar(&f.http2, "http2", false, "HTTP/2: over TLS (ALPN h2), or h2c with prior knowledge on an http:// URL (as h2load)")
	fl.BoolVar(&f.http3, "http3", false, "HTTP/3 over QUIC (UDP, TLS 1.3, ALPN h3), https:// only, one request at a time per connection; closed loop, -R and --cps")
	fl.IntVarP(&f.maxStreams, "max-streams", "m", 1, "concurrent streams per HTTP/2 or HTTP/3 connection (h2load -m); not with --cps")
	fl.StringVar(&f.host, "host", "", "Host header (and HTTP/2 :authority) to send instead of the URL's")
	fl.StringVar(&f.connectTo, "connect-to", "", "dial HOST:PORT instead of the URL's host, keeping its name for Host and SNI")
	fl.StringVar(&f.resolver, "resolver", "", "DNS server HOST:PORT to resolve the target with (default: the system's); each agent resolves once")
	fl.StringVar(&f.mixFile, "mix", "", "request-mix file: lines of METHOD URL [header=\"N: v\"] [body=FILE] [weight=N]; a URL without a scheme (/a) is resolved against the run's URL")
	fl.BoolVar(&f.tlsResume, "tls-resume", false, "resume TLS sessions on new connections (a session cache per worker); off: every handshake is full")
	fl.BoolVar(&f.earlyData, "early-data", false, "with --http3 and --tls-resume (or --resume-ratio): send each connection's first request in 0-RTT (TLS 1.3 early data) when it offers a session; GET and HEAD only; counted offered, accepted and rejected (a rejected request is sent again, once, on a new connection)")
	fl.StringVar(&f.tlsMin, "tls-min", "", "lowest TLS version: 1.0, 1.1, 1.2 or 1.3 (default 1.2)")
	fl.StringVar(&f.tlsMax, "tls-max", "", "highest TLS version (default 1.3)")
	fl.StringSliceVar(&f.ciphers, "ciphers", nil, "TLS 1.2 cipher suites, IANA or OpenSSL names, comma-separated")
	fl.StringSliceVar(&f.curves, "curves", nil, "key exchange groups in order: X25519, P-256, P-384, P-521, X25519MLKEM768")
	fl.StringVar(&f.sni, "sni", "", "TLS server name (SNI) and verified name (default: the URL's host; none for an IP)")
	fl.StringVar(&f.certFile, "cert", "", "client certificate PEM file (with --key)")
	fl.StringVar(&f.keyFile, "key", "", "client private key PEM file (with --cert)")
	fl.StringSliceVar(&f.alpn, "alpn", nil, "ALPN protocols to offer, comma-separated (default http/1.1, h2 with --http2, h3 with --http3)")
	f.formats.register(fl)
	fl.StringVar(&f.onAgentLoss, "on-agent-loss", plan.AbortOnLoss.String(), "when an agent is lost mid-run: abort (stop every other agent, report the window up to the loss) or continue (finish; the intervals after the loss are partial)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "show no progress while the run goes (losses and the report still print)")
	fl.Var(&f.format, "format", "summary on stdout: text (wrk's layout, its header printed at the start) or h2load (h2load's summary)")
	f.opts.addFlags(fl)
	return cmd
}

// plan builds and validates the plan from a plan file or a URL (args, as
// runArgs checked them), with the flags given on the command line, and a
// URL after the plan file, overriding the file's fields. Errors name the
// flag, or the plan field prefixed with the plan file's name.
func (f *runFlags) plan(cmd *cobra.Command, args ...string) (plan.Plan, error) {
	var p plan.Plan
	set := cmd.Flags().Changed
	arg := args[0]
	fromFile := isPlanFile(arg)
	file := ""
	if fromFile {
		file = arg
		data, err := os.ReadFile(arg)
		if err != nil {
			return p, &usageError{fmt.Errorf("plan file: %w", err)}
		}
		dir := filepath.Dir(arg)
		if p, err = plan.ParseFile(data, relativeTo(dir)); err != nil {
			return p, &usageError{prefixEach(arg, err)}
		}
	} else {
		p.URL = arg
	}
	override := func(name string, apply func()) {
		if set(name) || !fromFile {
			apply()
		}
	}
	// A zero the plan would take for "the default" is refused when it is
	// given: --timeout 0 is not "no timeout".
	for _, z := range []struct {
		name, want string
		zero       bool
	}{
		{"timeout", "want a timeout above 0 (the default is 2s)", f.timeout == 0},
		{"interval", "want an interval above 0 (the default is 1s)", f.interval == 0},
		{"max-streams", "want at least 1 (the default)", f.maxStreams == 0},
	} {
		if z.zero && set(z.name) {
			return p, &usageError{fmt.Errorf("%s 0: %s", flagName(cmd, z.name), z.want)}
		}
	}
	override("method", func() { p.Method = f.method })
	override("connections", func() { p.Connections = f.connections })
	override("duration", func() { p.Duration = time.Duration(f.duration) })
	override("timeout", func() { p.Timeout = time.Duration(f.timeout) })
	override("agents", func() { p.Agents = f.agents })
	override("requests", func() { p.Requests = f.requests })
	override("rate", func() { p.Rate = f.rate })
	override("max-connections", func() { p.MaxConnections = f.maxConnections })
	override("pacing-window", func() { p.PacingWindow = time.Duration(f.pacingWindow) })
	override("pacing-spin", func() { p.PacingSpin = f.pacingSpin })
	override("warmup", func() { p.Warmup = time.Duration(f.warmup) })
	override("interval", func() { p.Interval = time.Duration(f.interval) })
	override("no-keepalive", func() { p.NoKeepAlive = f.noKeepAlive })
	if f.http2 && f.http3 {
		return p, &usageError{fmt.Errorf("--http2 and --http3: choose one")}
	}
	override("http2", func() {
		p.Protocol = plan.H1
		if f.http2 {
			p.Protocol = plan.H2
		}
	})
	if set("http3") && f.http3 {
		p.Protocol = plan.H3
	}
	override("max-streams", func() { p.MaxStreams = f.maxStreams })
	override("connect-to", func() { p.ConnectTo = f.connectTo })
	override("resolver", func() { p.Resolver = f.resolver })
	override("insecure", func() { p.TLS.Insecure = f.insecure })
	override("tls-resume", func() { p.TLS.Resume = f.tlsResume })
	override("early-data", func() { p.TLS.EarlyData = f.earlyData })
	override("tls-min", func() { p.TLS.MinVersion = f.tlsMin })
	override("tls-max", func() { p.TLS.MaxVersion = f.tlsMax })
	override("ciphers", func() { p.TLS.Ciphers = f.ciphers })
	override("curves", func() { p.TLS.Curves = f.curves })
	override("sni", func() { p.TLS.ServerName = f.sni })
	override("alpn", func() { p.TLS.ALPN = f.alpn })
	if set("on-agent-loss") || !fromFile {
		l, err := plan.ParseLossPolicy(f.onAgentLoss)
		if err != nil {
			return p, &usageError{fmt.Errorf("--on-agent-loss: %w", err)}
		}
		p.OnAgentLoss = l
	}
	override("max-redirects", func() { p.MaxRedirects = f.maxRedirects })
	if err := f.connRate.apply(cmd, &p); err != nil {
		return p, &usageError{err}
	}
	// The load model follows the fields set, as in a plan file.
	p.Load = plan.LoadFor(p.Rate, p.Stages)
	// Count mode from the command line without -d: the count alone ends
	// the run.
	if !fromFile && p.Requests > 0 && !set("duration") {
		p.Duration = 0
	}
	// -d 0 would be taken for "not given" and run the 10 s default; with
	// a request count it keeps count mode's meaning (no time bound).
	if set("duration") && f.duration == 0 && p.Requests <= 0 {
		return p, &usageError{fmt.Errorf("-d/--duration 0s: want more than 0, e.g. 10s or 1m (0 means no time bound only with -n/--requests)")}
	}
	for _, h := range f.headers {
		hd, ok := plan.ParseHeader(h)
		if !ok {
			return p, &usageError{fmt.Errorf("-H %s: want 'Name: value'", plan.BadHeader(h))}
		}
		p.Headers = append(p.Headers, hd)
	}
	if f.host != "" {
		p.Headers = append(p.Headers, plan.Header{Name: "Host", Value: f.host})
	}
	var err error
	if f.bodyFile != "" {
		if p.Body, err = os.ReadFile(f.bodyFile); err != nil {
			return p, &usageError{fmt.Errorf("--body: %w", err)}
		}
	}
	if f.caFile != "" {
		if p.TLS.CAPEM, err = os.ReadFile(f.caFile); err != nil {
			return p, &usageError{fmt.Errorf("--cacert: %w", err)}
		}
		if err := plan.CheckCABundle(p.TLS.CAPEM); err != nil {
			return p, &usageError{fmt.Errorf("--cacert %s: %w", f.caFile, err)}
		}
		p.TLS.CAFile = f.caFile
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return p, &usageError{errors.New("--cert and --key go together")}
	}
	if f.certFile != "" {
		if p.TLS.CertPEM, err = os.ReadFile(f.certFile); err != nil {
			return p, &usageError{fmt.Errorf("--cert: %w", err)}
		}
		if p.TLS.KeyPEM, err = os.ReadFile(f.keyFile); err != nil {
			return p, &usageError{fmt.Errorf("--key: %w", err)}
		}
	}
	if f.mixFile != "" {
		fh, err := os.Open(f.mixFile)
		if err != nil {
			return p, &usageError{fmt.Errorf("--mix: %w", err)}
		}
		base := p.URL // relative mix lines go to the run's URL: the one after a plan file, else the plan's or the command line's
		if len(args) == 2 {
			base = args[1]
		}
		p.Mix, err = plan.ParseMix(fh, base, relativeTo(filepath.Dir(f.mixFile)))
		fh.Close()
		if err != nil {
			return p, &usageError{fmt.Errorf("--mix %s: %w", f.mixFile, err)}
		}
	}
	if len(args) == 2 {
		// After --mix, whose URLs move to the new origin too.
		if err := p.Retarget(args[1]); err != nil {
			return p, &usageError{fmt.Errorf("URL %q (after the plan file): %w", args[1], err)}
		}
	}
	if set("connections") && f.connections < 1 {
		return p, &usageError{fmt.Errorf("-c/--connections %d: want at least 1", f.connections)}
	}
	p.SetDefaults()
	cut, err := cutStages(cmd, file, &p)
	if err != nil {
		return p, err
	}
	parsed, err := p.Check()
	if err != nil {
		return p, &usageError{flagErrors(cmd, file, err)}
	}
	if err := tlsOnly(cmd, file, &p, parsed.Target); err != nil {
		return p, &usageError{err}
	}
	if cut != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "coordctl:", cut)
	}
	if p.TLS.ResumeRatio > 0 && p.Load == plan.ClosedLoop && !p.NoKeepAlive {
		fmt.Fprintf(cmd.ErrOrStderr(), "coordctl: warning: --resume-ratio %g on keep-alive connections: a session is offered only when a connection opens again (a reconnect), so the ratio applies to few or no handshakes; add --no-keepalive or use --cps\n", p.TLS.ResumeRatio)
	}
	return p, nil
}

// fieldFlags maps plan fields to the run flags that set them.
var fieldFlags = map[string]string{
	"method": "method", "connections": "connections", "duration": "duration", "timeout": "timeout",
	"interval": "interval", "agents": "agents", "requests": "requests", "rate": "rate",
	"max_connections": "max-connections", "warmup": "warmup", "http2": "http2", "http3": "http3", "max_streams": "max-streams",
	"connect_to": "connect-to", "resolver": "resolver", "tls.min_version": "tls-min", "tls.max_version": "tls-max",
	"tls.ciphers": "ciphers", "tls.curves": "curves", "tls.alpn": "alpn", "tls.cert": "cert", "on_agent_loss": "on-agent-loss",
	"requests_per_connection": "requests-per-connection", "cps": "cps", "max_redirects": "max-redirects", "tls.resume_ratio": "resume-ratio", "tls.early_data": "early-data", "source_ips": "source-ips",
	"tls.ca_file": "cacert", "close": "close", "pacing_window": "pacing-window", "pacing_spin": "pacing-spin",
}

// errZeroTimeout refuses --timeout 0 (search's and ab's, whose default is
// 2s): the plan would take 0 for its default, not for "no timeout".
var errZeroTimeout = errors.New("--timeout 0: want a timeout above 0 (the default is 2s)")

// flagName returns how errors name flag: "-c/--connections", "--rate".
func flagName(cmd *cobra.Command, flag string) string {
	if fl := cmd.Flags().Lookup(flag); fl != nil {
		return daemon.FlagName(fl)
	}
	return "--" + flag
}

// flagErrors restates plan.Validate's errors for the command line: a field
// whose value came from a flag (every field of a URL run) is named by the
// flag ("-m/--max-streams 10: ..."); the others keep the plan's field name,
// prefixed with the plan file's name when there is one.
func flagErrors(cmd *cobra.Command, file string, err error) error {
	errs := joined(err)
	out := make([]error, len(errs))
	for i, e := range errs {
		var fe *plan.FieldError
		flag := ""
		if errors.As(e, &fe) {
			flag = fieldFlags[fe.Field]
		}
		switch {
		case fe != nil && fe.Field == "url" && file == "":
			out[i] = fmt.Errorf("URL %s: %s", fe.Value, fe.Allowed) // the command's argument
		case flag != "" && (file == "" || cmd.Flags().Changed(flag)):
			value := " " + fe.Value
			if fe.Value == "" || cmd.Flags().Lookup(flag).Value.Type() == "bool" {
				value = ""
			}
			out[i] = fmt.Errorf("%s%s: %s", flagName(cmd, flag), value, fe.Allowed)
		case file != "":
			out[i] = fmt.Errorf("%s: %w", file, e)
		default:
			out[i] = e
		}
	}
	return errors.Join(out...)
}

// prefixEach prefixes every error joined in err (one per line) with name.
func prefixEach(name string, err error) error {
	errs := joined(err)
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = fmt.Errorf("%s: %w", name, e)
	}
	return errors.Join(out...)
}

// tlsOnly rejects TLS options, which do nothing, with an http:// URL of a
// valid plan p with target t. The option is named by its flag if one set
// it, else by its plan field.
func tlsOnly(cmd *cobra.Command, file string, p *plan.Plan, t plan.Target) error {
	if t.TLS {
		return nil
	}
	for _, o := range []struct {
		flag, field string
		on          bool
	}{
		{"insecure", "tls.insecure", p.TLS.Insecure},
		{"cacert", "tls.ca_file", len(p.TLS.CAPEM) > 0},
		{"cert", "tls.cert_file", len(p.TLS.CertPEM) > 0},
		{"sni", "tls.sni", p.TLS.ServerName != ""},
		{"tls-resume", "tls.resume", p.TLS.Resume && !cmd.Flags().Changed("resume-ratio")},
		{"resume-ratio", "tls.resume_ratio", p.TLS.ResumeRatio > 0},
		{"tls-min", "tls.min_version", p.TLS.MinVersion != ""},
		{"tls-max", "tls.max_version", p.TLS.MaxVersion != ""},
		{"ciphers", "tls.ciphers", len(p.TLS.Ciphers) > 0},
		{"curves", "tls.curves", len(p.TLS.Curves) > 0},
		{"alpn", "tls.alpn", len(p.TLS.ALPN) > 0},
	} {
		if !o.on {
			continue
		}
		name := "--" + o.flag
		if file != "" && !cmd.Flags().Changed(o.flag) {
			name = file + ": " + o.field
		}
		return fmt.Errorf("%s: TLS options do nothing with an http:// URL (%s): use https://, or drop the option", name, p.URL)
	}
	return nil
}

// isPlanFile reports whether the run argument names a YAML plan file
// rather than a URL.
func isPlanFile(arg string) bool {
	if strings.Contains(arg, "://") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(arg))
	return ext == ".yaml" || ext == ".yml"
}

// relativeTo reads files relative to dir (absolute names as they are).
func relativeTo(dir string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return os.ReadFile(name)
	}
}

// output is the file of an output flag such as --json: "" for none, "-"
// for stdout. It is opened before the run, so that a bad path fails at
// once rather than after the run.
type output struct {
	flag, name string
	fh         *os.File
	// created is set when opening created the file: discard removes it.
	created bool
}

// openOutput opens (creating it if needed, truncating nothing yet) the
// file name given to flag. A bad path is a usage error naming the flag and
// the path.
func openOutput(flag, name string) (*output, error) {
	o := &output{flag: flag, name: name}
	if name == "" || name == "-" {
		return o, nil
	}
	_, statErr := os.Stat(name)
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &usageError{fmt.Errorf("%s: %w", flag, err)}
	}
	o.fh, o.created = fh, errors.Is(statErr, fs.ErrNotExist)
	return o, nil
}

// discard closes a file that was not written, removing it if openOutput
// created it. It does nothing after write.
func (o *output) discard() {
	if o.fh == nil {
		return
	}
	o.fh.Close()
	if o.created {
		os.Remove(o.name)
	}
	o.fh = nil
}

// writeJSON replaces the file's content with rep's JSON and closes it.
func (o *output) writeJSON(rep *report.Report) error {
	fh := o.fh
	o.fh = nil
	err := fh.Truncate(0)
	if err == nil {
		err = rep.WriteJSON(fh)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	return nil
}

// writeReport prints the summary (--format) and writes the JSON output if
// asked ("-": JSON only, to stdout).
func writeReport(cmd *cobra.Command, rep *report.Report, sum *summary, jsonOut *output) error {
	if jsonOut.name != "-" {
		if err := sum.write(rep); err != nil {
			return err
		}
	}
	switch jsonOut.name {
	case "":
	case "-":
		return rep.WriteJSON(cmd.OutOrStdout())
	default:
		return jsonOut.writeJSON(rep)
	}
	return nil
}

// notWhole says why the run of rep was not whole: each lost agent (when
// and how) and what the plan's policy did.
func notWhole(rep *report.Report) error {
	var losses []string
	for _, l := range rep.LostAgents {
		losses = append(losses, fmt.Sprintf("lost agent %s after %.2fs: %s", l.Name, l.LostAtS, l.How()))
	}
	what := fmt.Sprintf("the report covers the %.2fs that ran, marked partial", rep.DurationS)
	if rep.Aborted {
		what = fmt.Sprintf("aborted (--on-agent-loss abort): the report covers the %.2fs up to the loss", rep.DurationS)
	}
	return fmt.Errorf("run %s was not whole: %s; %s", rep.RunID, strings.Join(losses, "; "), what)
}

// wrkDuration is a duration flag that also takes a bare number of seconds,
// as wrk's -d and --timeout do ("-d5" is five seconds).
type wrkDuration time.Duration

func (d *wrkDuration) String() string { return time.Duration(*d).String() }
func (d *wrkDuration) Type() string   { return "duration" }
func (d *wrkDuration) Set(s string) error {
	v, err := plan.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = wrkDuration(v)
	return nil
}

// windowDuration is a measurement window flag (ab's and search's -d,
// demo's): a wrkDuration that must be more than 0, since a window of 0
// would be taken for "not given" and run the default.
type windowDuration wrkDuration

func (d *windowDuration) String() string { return time.Duration(*d).String() }
func (d *windowDuration) Type() string   { return "duration" }
func (d *windowDuration) Set(s string) error {
	var v wrkDuration
	if err := v.Set(s); err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("%v: want more than 0, e.g. 10s or 1m", time.Duration(v))
	}
	*d = windowDuration(v)
	return nil
}

// joined returns the errors errors.Join put in err, or err alone.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

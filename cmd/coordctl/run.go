package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

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

	requests    int64
	warmup      wrkDuration
	noKeepAlive bool
	http2       bool
	maxStreams  int
	host        string
	connectTo   string
	resolver    string
	mixFile     string

	durationSet bool

	tlsResume bool
	tlsMin    string
	tlsMax    string
	ciphers   []string
	curves    []string
	sni       string
	certFile  string
	keyFile   string
	alpn      []string
}

func newRunCmd(coordAddr *string) *cobra.Command {
	f := runFlags{duration: wrkDuration(plan.DefaultDuration), timeout: wrkDuration(plan.DefaultTimeout)}
	cmd := &cobra.Command{
		Use:   "run [flags] URL",
		Short: "Run a closed-loop load test against URL on the cluster's agents",
		Example: `  coordctl run -c50 -d10s --latency https://127.0.0.1:8443/
  coordctl run -c 750 -d 1m -H 'Accept-Encoding: br' --json out.json https://target.example/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{fmt.Errorf("run takes exactly one URL, got %d arguments (see coordctl run --help)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.durationSet = cmd.Flags().Changed("duration")
			p, err := f.plan(args[0])
			if err != nil {
				return err
			}
			client, closeConn, err := dial(*coordAddr)
			if err != nil {
				return err
			}
			defer closeConn()
			res, err := submit(cmd.Context(), client, *coordAddr, wire.PlanToProto(p), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rep, err := report.FromResult(res)
			if err != nil {
				return err
			}
			return writeReport(cmd, rep, f.latency, f.jsonFile)
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
	fl.Int64VarP(&f.requests, "requests", "n", 0, "count mode: exactly N requests across the cluster; with -d, whichever ends first")
	fl.Var(&f.warmup, "warmup", "load before the window, excluded from the results and reported apart, e.g. 5s")
	fl.BoolVar(&f.noKeepAlive, "no-keepalive", false, "one request per connection: a TCP connect and TLS handshake per request (httpress without -k)")
	fl.BoolVar(&f.http2, "http2", false, "HTTP/2 over TLS (ALPN h2)")
	fl.IntVarP(&f.maxStreams, "max-streams", "m", 1, "concurrent streams per HTTP/2 connection (h2load -m)")
	fl.StringVar(&f.host, "host", "", "Host header (and HTTP/2 :authority) to send instead of the URL's")
	fl.StringVar(&f.connectTo, "connect-to", "", "dial HOST:PORT instead of the URL's host, keeping its name for Host and SNI")
	fl.StringVar(&f.resolver, "resolver", "", "DNS server HOST:PORT to resolve the target with (default: the system's); each agent resolves once")
	fl.StringVar(&f.mixFile, "mix", "", "request-mix file: lines of METHOD URL [header=\"N: v\"] [body=FILE] [weight=N]")
	fl.BoolVar(&f.tlsResume, "tls-resume", false, "resume TLS sessions on new connections (a session cache per worker); off: every handshake is full")
	fl.StringVar(&f.tlsMin, "tls-min", "", "lowest TLS version: 1.0, 1.1, 1.2 or 1.3 (default 1.2)")
	fl.StringVar(&f.tlsMax, "tls-max", "", "highest TLS version (default 1.3)")
	fl.StringSliceVar(&f.ciphers, "ciphers", nil, "TLS 1.2 cipher suites, IANA or OpenSSL names, comma-separated")
	fl.StringSliceVar(&f.curves, "curves", nil, "key exchange groups in order: X25519, P-256, P-384, P-521, X25519MLKEM768")
	fl.StringVar(&f.sni, "sni", "", "TLS server name (SNI) and verified name (default: the URL's host; none for an IP)")
	fl.StringVar(&f.certFile, "cert", "", "client certificate PEM file (with --key)")
	fl.StringVar(&f.keyFile, "key", "", "client private key PEM file (with --cert)")
	fl.StringSliceVar(&f.alpn, "alpn", nil, "ALPN protocols to offer, comma-separated (default http/1.1, or h2 with --http2)")
	return cmd
}

// plan builds and validates the plan; errors name the flag.
func (f *runFlags) plan(url string) (plan.Plan, error) {
	p := plan.Plan{
		URL: url, Method: f.method, Connections: f.connections,
		Duration: time.Duration(f.duration), Timeout: time.Duration(f.timeout),
		Agents: f.agents, Requests: f.requests, Warmup: time.Duration(f.warmup),
		NoKeepAlive: f.noKeepAlive, HTTP2: f.http2, MaxStreams: f.maxStreams,
		ConnectTo: f.connectTo, Resolver: f.resolver,
		TLS: plan.TLS{
			Insecure: f.insecure, Resume: f.tlsResume, MinVersion: f.tlsMin, MaxVersion: f.tlsMax,
			Ciphers: f.ciphers, Curves: f.curves, ServerName: f.sni, ALPN: f.alpn,
		},
	}
	// Count mode without an explicit -d: the count alone ends the run.
	if f.requests > 0 && !f.durationSet {
		p.Duration = 0
	}
	if f.host != "" {
		p.Headers = append(p.Headers, plan.Header{Name: "Host", Value: f.host})
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return p, &usageError{errors.New("--cert and --key go together")}
	}
	if f.certFile != "" {
		var err error
		if p.TLS.CertPEM, err = os.ReadFile(f.certFile); err != nil {
			return p, fmt.Errorf("--cert: %w", err)
		}
		if p.TLS.KeyPEM, err = os.ReadFile(f.keyFile); err != nil {
			return p, fmt.Errorf("--key: %w", err)
		}
	}
	if f.mixFile != "" {
		fh, err := os.Open(f.mixFile)
		if err != nil {
			return p, fmt.Errorf("--mix: %w", err)
		}
		dir := filepath.Dir(f.mixFile)
		p.Mix, err = plan.ParseMix(fh, func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(dir, name)
			}
			return os.ReadFile(name)
		})
		fh.Close()
		if err != nil {
			return p, fmt.Errorf("--mix %s: %w", f.mixFile, err)
		}
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return p, &usageError{fmt.Errorf("-H %q: want 'Name: value'", h)}
		}
		p.Headers = append(p.Headers, plan.Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	}
	if f.bodyFile != "" {
		b, err := os.ReadFile(f.bodyFile)
		if err != nil {
			return p, fmt.Errorf("--body: %w", err)
		}
		p.Body = b
	}
	if f.caFile != "" {
		b, err := os.ReadFile(f.caFile)
		if err != nil {
			return p, fmt.Errorf("--cacert: %w", err)
		}
		p.TLS.CAPEM = b
	}
	if f.connections < 1 {
		return p, &usageError{fmt.Errorf("-c/--connections %d: want at least 1", f.connections)}
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return p, &usageError{err}
	}
	return p, nil
}

// writeReport prints the text report and writes the JSON file if asked.
func writeReport(cmd *cobra.Command, rep *report.Report, latency bool, jsonFile string) error {
	if jsonFile != "-" {
		if err := rep.WriteText(cmd.OutOrStdout(), report.TextOptions{Latency: latency}); err != nil {
			return err
		}
	}
	switch jsonFile {
	case "":
	case "-":
		return rep.WriteJSON(cmd.OutOrStdout())
	default:
		fh, err := os.Create(jsonFile)
		if err != nil {
			return fmt.Errorf("--json: %w", err)
		}
		if err := rep.WriteJSON(fh); err != nil {
			fh.Close()
			return fmt.Errorf("--json: %w", err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return nil
}

// wrkDuration is a duration flag that also takes a bare number of seconds,
// as wrk's -d and --timeout do ("-d5" is five seconds).
type wrkDuration time.Duration

func (d *wrkDuration) String() string { return time.Duration(*d).String() }
func (d *wrkDuration) Type() string   { return "duration" }
func (d *wrkDuration) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		*d = wrkDuration(n * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 10s, 1m or 30")
	}
	*d = wrkDuration(v)
	return nil
}

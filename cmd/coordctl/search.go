package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/search"
	"github.com/phalanxload/phalanx/internal/threshold"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// exitInconclusive: the search could not answer (a client-bound or short
// step: the cluster is too small). A search stopped by Ctrl-C,
// --max-steps or --max-time exits exitStoppedEarly (3).
const exitInconclusive = 6

// searchFlags are coordctl search's flags.
type searchFlags struct {
	rateRange, connRange string
	slos                 []string
	precision            string
	repeats, maxSteps    int
	maxTime              time.Duration
	window               windowDuration
	warmup               wrkDuration
	pacingWindow         wrkDuration
	pacingSpin           bool
	timeout              wrkDuration
	connections, maxConn int
	agents               int
	caFile               string
	insecure             bool
	http2                bool
	headers              []string
	jsonFile             string
	htmlFile             string
	tags                 []string
	quiet                bool
}

// newSearchCmd finds the highest load at which every SLO holds
// (internal/search): open loop over --rate-range by default, closed loop
// over --connections-range; each step a stored run carrying the search's
// ID.
func newSearchCmd(co *coordinatorFlags) *cobra.Command {
	f := searchFlags{window: windowDuration(10 * time.Second), warmup: wrkDuration(2 * time.Second), timeout: wrkDuration(plan.DefaultTimeout)}
	cmd := &cobra.Command{
		Use:   "search --slo SLO [flags] URL",
		Short: "Find the highest load at which every SLO holds (capacity search: growth, bisection, repeats at the boundary)",
		Example: `  coordctl search --slo 'p99<3ms' --slo 'failed<0.1%' https://target.example/
  coordctl search --connections-range 10..4000 --slo 'p99<3ms' https://target.example/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, base, err := f.config(cmd, args[0])
			if err != nil {
				return err
			}
			out, err := openOutput("--json", f.jsonFile)
			if err != nil {
				return err
			}
			defer out.discard()
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
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			id := newSearchID()
			stderr := cmd.ErrOrStderr()
			run := func(ctx context.Context, x float64, repeat int) (search.Outcome, error) {
				p := base
				if cfg.Closed {
					p.Connections, p.MaxConnections = int(x), int(x)
				} else {
					p.Rate = int64(math.Round(x))
				}
				if err := p.Validate(); err != nil {
					return search.Outcome{}, fmt.Errorf("plan: %w", err)
				}
				if !f.quiet {
					fmt.Fprintf(stderr, "search %s: step at %s %s%s ...\n", id, strconv.FormatFloat(x, 'f', -1, 64), unitOf(cfg.Closed), repeatNote(repeat))
				}
				req := &pb.RunPlanRequest{Plan: wire.PlanToProto(p), Thresholds: f.slos, SearchId: id,
					Tags: append([]string{"search"}, f.tags...), Note: fmt.Sprintf("capacity search %s, step at %v", id, x)}
				res, err := submit(ctx, client, co.addr, req, newProgressView(stderr, p, true), nil, nil)
				if err != nil {
					return search.Outcome{}, err
				}
				r, err := wire.RunFromProto(res)
				if err != nil {
					return search.Outcome{}, err
				}
				rep, err := report.Build(r)
				if err != nil {
					return search.Outcome{}, err
				}
				o := outcomeOf(rep)
				if !f.quiet {
					fmt.Fprintf(stderr, "search %s: %s: achieved %.1f/s, p99 %s\n", id, rep.RunID, o.AchievedRPS, time.Duration(o.P99Us)*time.Microsecond)
				}
				return o, nil
			}
			res, err := search.Run(ctx, cfg, run)
			if res == nil || (err != nil && len(res.Steps) == 0) {
				return err // nothing ran
			}
			res.SearchID, res.URL = id, base.URL
			res.PacingWindowUs, res.PacingSpin = base.PacingWindow.Microseconds(), base.PacingSpin
			if werr := writeSearch(cmd, res, out); werr != nil {
				return werr
			}
			if werr := htmlOut.writeSearchHTML(res); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			switch res.Outcome {
			case "inconclusive":
				return &exitError{exitInconclusive, fmt.Errorf("search %s inconclusive: %s", id, res.Message)}
			case "stopped":
				return &exitError{exitStoppedEarly, fmt.Errorf("search %s stopped: %s", id, res.Message)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringArrayVar(&f.slos, "slo", nil, "objective every passing step holds, as --threshold (repeatable): p99<3ms, failed<0.1% (errors and non-2xx/3xx responses)")
	fl.StringVar(&f.rateRange, "rate-range", "1000..200000", "open loop (the default): the rates to search, requests/s FROM..TO")
	fl.StringVar(&f.connRange, "connections-range", "", "closed loop: the connections to search, FROM..TO (e.g. 10..4000)")
	fl.StringVar(&f.precision, "precision", "2%", "bisect until the bracket is this narrow, of its lower end")
	fl.IntVar(&f.repeats, "repeats", search.DefaultRepeats, "runs of each of the two steps next to the boundary (the knee's interval comes from them)")
	fl.IntVar(&f.maxSteps, "max-steps", search.DefaultMaxSteps, "at most this many steps (runs), repeats included")
	fl.DurationVar(&f.maxTime, "max-time", 0, "start no step after this long (0: no bound)")
	fl.VarP(&f.window, "duration", "d", "each step's measurement window")
	fl.Var(&f.warmup, "warmup", "each step's warm-up before its window")
	fl.IntVarP(&f.connections, "connections", "c", plan.DefaultConnections, "open loop: connections to open (total); closed loop: searched instead")
	fl.IntVar(&f.maxConn, "max-connections", 0, "open loop: connections a step may open when all are busy (default: 4 × -c)")
	fl.Var(&f.pacingWindow, "pacing-window", "open loop: round each step's intended send times down to multiples of this window, e.g. 1ms, as run --pacing-window; 0 schedules each request at its own instant")
	fl.BoolVar(&f.pacingSpin, "pacing-spin", false, "open loop: spin to each step's intended send times, as run --pacing-spin")
	fl.Var(&f.timeout, "timeout", "per-request timeout")
	fl.IntVar(&f.agents, "agents", 0, "number of agents to use (default: all live agents)")
	fl.StringVar(&f.caFile, "cacert", "", "PEM file of CA certificates to trust besides the system pool")
	fl.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification")
	fl.BoolVar(&f.http2, "http2", false, "HTTP/2 (ALPN h2, or h2c on an http:// URL)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	fl.StringVar(&f.jsonFile, "json", "", "also write the search's result (knee, steps, curve) as JSON to this file ('-' for stdout)")
	fl.StringVar(&f.htmlFile, "html", "", "also write the search as one self-contained HTML page (knee, throughput-latency curve, steps) to this file")
	fl.StringArrayVar(&f.tags, "tag", nil, "label stored with every step's run (besides \"search\"), repeatable")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no line per step on stderr")
	return cmd
}

// config checks the flags and returns the search's configuration and the
// base plan of its steps. Errors name the flag.
func (f *searchFlags) config(cmd *cobra.Command, url string) (search.Config, plan.Plan, error) {
	var cfg search.Config
	if len(f.slos) == 0 {
		return cfg, plan.Plan{}, &usageError{errors.New("search: no --slo: give at least one, e.g. --slo 'p99<3ms'")}
	}
	ts, err := threshold.ParseAll(f.slos)
	if err != nil {
		return cfg, plan.Plan{}, &usageError{fmt.Errorf("--slo: %w", err)}
	}
	for _, t := range ts {
		if t.Stage >= 0 {
			return cfg, plan.Plan{}, &usageError{fmt.Errorf("--slo %s: a search step has no stages", t.Text)}
		}
		cfg.SLOs = append(cfg.SLOs, search.SLO{Text: t.Text, Limit: t.Limit, Below: t.Op == threshold.Less || t.Op == threshold.LessEq})
	}
	rng, flag := f.rateRange, "--rate-range"
	if f.connRange != "" {
		if cmd.Flags().Changed("rate-range") {
			return cfg, plan.Plan{}, &usageError{errors.New("--rate-range and --connections-range: give one (open or closed loop)")}
		}
		rng, flag, cfg.Closed = f.connRange, "--connections-range", true
	}
	if cfg.From, cfg.To, err = parseRange(rng); err != nil {
		return cfg, plan.Plan{}, &usageError{fmt.Errorf("%s %q: %w", flag, rng, err)}
	}
	pr := strings.TrimSuffix(f.precision, "%")
	v, err := strconv.ParseFloat(pr, 64)
	if err != nil || v <= 0 || v >= 100 {
		return cfg, plan.Plan{}, &usageError{fmt.Errorf("--precision %q: want a percentage between 0 and 100, e.g. 2%%", f.precision)}
	}
	cfg.Precision = v / 100
	cfg.Repeats, cfg.MaxSteps, cfg.MaxTime, cfg.Agents = f.repeats, f.maxSteps, f.maxTime, f.agents
	if f.repeats < 1 || f.maxSteps < 1 || f.maxTime < 0 {
		return cfg, plan.Plan{}, &usageError{errors.New("--repeats and --max-steps: want at least 1; --max-time: not negative")}
	}
	if f.timeout == 0 {
		return cfg, plan.Plan{}, &usageError{errZeroTimeout}
	}
	p := plan.Plan{URL: url, Method: plan.DefaultMethod, Connections: f.connections, Duration: time.Duration(f.window),
		Warmup: time.Duration(f.warmup), Timeout: time.Duration(f.timeout), Interval: plan.DefaultInterval, Agents: f.agents,
		PacingWindow: time.Duration(f.pacingWindow), PacingSpin: f.pacingSpin} // refused in closed loop by Validate
	p.Load = plan.ClosedLoop
	if !cfg.Closed {
		p.Load, p.Rate = plan.OpenLoop, int64(cfg.From)
		p.MaxConnections = f.maxConn
		if p.MaxConnections == 0 {
			p.MaxConnections = 4 * f.connections
		}
	}
	if err := applyTargetFlags(&p, f.insecure, f.http2, f.headers, f.caFile); err != nil {
		return cfg, p, err
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return cfg, p, &usageError{fmt.Errorf("search: %w", pacingFlagErrors(err))}
	}
	return cfg, p, nil
}

// parseRange parses FROM..TO, two positive numbers, FROM <= TO.
func parseRange(s string) (from, to float64, err error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, errors.New("want FROM..TO, e.g. 1000..200000")
	}
	if from, err = strconv.ParseFloat(strings.TrimSpace(a), 64); err != nil || from <= 0 {
		return 0, 0, fmt.Errorf("FROM %q: want a positive number", a)
	}
	if to, err = strconv.ParseFloat(strings.TrimSpace(b), 64); err != nil || to < from {
		return 0, 0, fmt.Errorf("TO %q: want a number at least FROM", b)
	}
	return from, to, nil
}

// outcomeOf reads a step's outcome from its run's report.
func outcomeOf(rep *report.Report) search.Outcome {
	o := search.Outcome{RunID: rep.RunID, AchievedRPS: rep.RPS, ClientBound: rep.ClientBound, ClientBoundReasons: rep.ClientBoundReasons,
		ServerBound: rep.ServerBound, ServerBoundReasons: rep.ServerBoundReasons, AgentDemand: map[string]float64{}, AgentClientLate: map[string]int64{}}
	if l := rep.Latency; l != nil {
		o.P50Us, o.P99Us, o.P999Us = l.P50, l.P99, l.P999
	}
	for _, n := range rep.Errors {
		o.Errors += n
	}
	for _, t := range rep.Thresholds {
		v := math.NaN()
		if t.Value != nil {
			v = *t.Value
		}
		o.SLOValues, o.SLOPass = append(o.SLOValues, v), append(o.SLOPass, t.Pass)
	}
	for _, a := range rep.AgentRows {
		o.AgentDemand[a.Name] = a.CPUUtil + a.CPUWait
		o.AgentClientLate[a.Name] = a.ClientLate
	}
	return o
}

func unitOf(closed bool) string {
	if closed {
		return "connections"
	}
	return "requests/s"
}

func repeatNote(r int) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf(" (repeat %d)", r)
}

// newSearchID returns a search ID as the coordinator's run IDs: UTC time
// plus 6 random hex digits, prefixed "search-".
func newSearchID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "search-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// writeSearch writes the search's text on stdout (its JSON instead with
// --json -) and its JSON to the --json file.
func writeSearch(cmd *cobra.Command, res *report.Search, out *output) error {
	if out.name == "-" {
		return report.WriteSearchJSON(cmd.OutOrStdout(), res)
	}
	if err := report.WriteSearchText(cmd.OutOrStdout(), res); err != nil {
		return err
	}
	if out.fh == nil {
		return nil
	}
	fh := out.fh
	out.fh = nil
	err := fh.Truncate(0)
	if err == nil {
		err = report.WriteSearchJSON(fh, res)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"os"
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
	fl.Var(&f.timeout, "timeout", "per-request timeout (write to last body byte), e.g. 2s")
	fl.StringVarP(&f.method, "method", "X", plan.DefaultMethod, "request method")
	fl.StringVar(&f.bodyFile, "body", "", "file whose content is sent as the request body")
	fl.BoolVar(&f.latency, "latency", false, "print the latency distribution (50/75/90/99/99.9/99.99 %)")
	fl.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification (verification is on by default)")
	fl.StringVar(&f.caFile, "cacert", "", "PEM file of CA certificates to trust besides the system pool")
	fl.IntVar(&f.agents, "agents", 0, "number of agents to use (default: all live agents)")
	fl.StringVar(&f.jsonFile, "json", "", "also write the report as JSON to this file ('-' for stdout)")
	return cmd
}

// plan builds and validates the plan; errors name the flag.
func (f *runFlags) plan(url string) (plan.Plan, error) {
	p := plan.Plan{
		URL: url, Method: f.method, Connections: f.connections,
		Duration: time.Duration(f.duration), Timeout: time.Duration(f.timeout),
		Agents: f.agents, TLS: plan.TLS{Insecure: f.insecure},
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

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/plan"
)

// connRateFlags are run's connection-rate flags (--cps,
// --requests-per-connection, --max-open): plan.Plan.ConnectionRate.
type connRateFlags struct {
	cps                   int64
	requestsPerConnection int
	maxOpen               int
	resumeRatio           float64
	close                 string
	sourceIPs             []string
	sessionIDs            bool
}

func (f *connRateFlags) register(fl *pflag.FlagSet) {
	fl.Int64Var(&f.cps, "cps", 0, "connection rate: total new connections/s across the cluster, open loop (each opens at its intended time, sends --requests-per-connection requests and closes; the TLS handshake benchmark); not with -R")
	fl.IntVar(&f.requestsPerConnection, "requests-per-connection", 1, "with --cps: requests each connection sends before it closes (0: the handshake only)")
	fl.Float64Var(&f.resumeRatio, "resume-ratio", 0, "fraction (0-1) of TLS handshakes that offer a session from the worker's cache, the others full; implies --tls-resume; each handshake is counted full, resumed or offered but refused")
	fl.StringVar(&f.close, "close", "fin", "how connections close: fin (the polite default) or rst (a TCP reset, SO_LINGER 0: no TIME_WAIT on the client, as tls-perf)")
	fl.StringSliceVar(&f.sourceIPs, "source-ips", nil, "local addresses each agent binds its connections to, round-robin, comma-separated (more ephemeral ports than one address holds); each must be an address of every agent's host")
	fl.BoolVar(&f.sessionIDs, "tls12-session-ids", false, "resume TLS 1.2 by session ID instead of tickets: refused, Go's crypto/tls client resumes only with tickets")
	fl.IntVar(&f.maxOpen, "max-open", 0, "with --cps: connections open at once across the cluster; starts beyond it wait and count as missed (default: the larger of -c and --cps)")
}

// apply sets p's connection-rate fields from the flags given, over a plan
// file's (cps, requests_per_connection, max_open, close, source_ips,
// tls.resume_ratio): --cps replaces the rate, --max-open the connection
// cap (default: plan.Plan.SetDefaults'). --requests-per-connection and
// --max-open need --cps or a plan file with cps.
func (f *connRateFlags) apply(cmd *cobra.Command, p *plan.Plan) error {
	set := cmd.Flags().Changed
	name := func(n string) string { return flagName(cmd, n) }
	if f.sessionIDs {
		return fmt.Errorf("--tls12-session-ids: not supported: Go's crypto/tls client resumes TLS 1.2 only with session tickets (RFC 5077), never by session ID; --tls-resume uses tickets")
	}
	switch f.close {
	case "fin", "rst":
		if set("close") {
			p.CloseReset = f.close == "rst"
		}
	default:
		return fmt.Errorf("--close %q: want fin or rst", f.close)
	}
	if set("source-ips") {
		p.SourceIPs = f.sourceIPs
	}
	if set("resume-ratio") {
		p.TLS.Resume, p.TLS.ResumeRatio = true, f.resumeRatio
	}
	// A rate flag over a plan file whose stages ramp the rate would set
	// only the starting rate (the stages keep their own targets): refused.
	for _, n := range []string{"cps", "rate"} {
		if set(n) && rateStages(p) {
			field := "rate"
			if p.ConnectionRate {
				field = "cps"
			}
			return fmt.Errorf("%s over the plan file's stages, which ramp %s to their own targets: the flag would change only the starting rate; edit the stages' %s or drop the flag", name(n), field, field)
		}
	}
	if set("max-open") && set("max-connections") {
		return fmt.Errorf("--max-open and --max-connections: choose one (--max-open is the connection-rate name)")
	}
	if !set("cps") {
		if !p.ConnectionRate {
			for _, n := range []string{"requests-per-connection", "max-open"} {
				if set(n) {
					return fmt.Errorf("%s: only with --cps (or cps in the plan file)", name(n))
				}
			}
			return nil
		}
		// A plan file's connection rate.
		if set("rate") {
			return fmt.Errorf("%s: the plan file sets cps (new connections/s): give --cps to change the rate", name("rate"))
		}
	} else {
		if set("rate") {
			return fmt.Errorf("--cps and %s: choose one (--cps is new connections/s, -R requests/s)", name("rate"))
		}
		if f.cps <= 0 {
			return fmt.Errorf("--cps %d: want a rate above 0 connections/s", f.cps)
		}
		if !p.ConnectionRate {
			p.RequestsPerConnection = f.requestsPerConnection // the default, 1
		}
		p.Rate, p.ConnectionRate = f.cps, true
	}
	if set("requests-per-connection") {
		p.RequestsPerConnection = f.requestsPerConnection
	}
	if set("max-open") {
		p.MaxConnections = f.maxOpen
	}
	return nil
}

// rateStages reports whether p's stages ramp a rate (requests/s, or
// connections/s in a connection rate), not connections.
func rateStages(p *plan.Plan) bool {
	for _, st := range p.Stages {
		if st.Rate > 0 {
			return true
		}
	}
	return false
}

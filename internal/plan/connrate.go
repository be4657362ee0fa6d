package plan

import (
	"errors"
	"fmt"
	"net"
)

// validateConnectionRate checks the connection-rate fields (ConnectionRate,
// RequestsPerConnection) against the rest of the plan, and the resumption
// mix (TLS.ResumeRatio).
func (p *Plan) validateConnectionRate() []error {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	if r := p.TLS.ResumeRatio; r < 0 || r > 1 || r != r {
		bad("tls.resume_ratio", fmt.Sprint(r), "want a fraction from 0 to 1 of the handshakes that offer a cached session")
	} else if r > 0 && !p.TLS.Resume {
		bad("tls.resume_ratio", fmt.Sprint(r), "a resume ratio needs session resumption (tls.resume)")
	}
	for _, s := range p.SourceIPs {
		if net.ParseIP(s) == nil {
			bad("source_ips", s, "want an IP address of the agent's host (an IP literal, not a name)")
		}
	}
	if !p.ConnectionRate {
		if p.RequestsPerConnection != 0 {
			bad("requests_per_connection", fmt.Sprint(p.RequestsPerConnection), "only a connection-rate plan (cps) closes its connections after a number of requests")
		}
		return errs
	}
	if p.RequestsPerConnection < 0 {
		bad("requests_per_connection", fmt.Sprint(p.RequestsPerConnection), "want 0 (the handshake only) or more")
	}
	if !p.OpenLoop() {
		bad("cps", "set", "a connection rate is an open-loop schedule: it needs a rate above 0 connections/s")
	}
	if p.Protocol == H2 {
		bad("cps", "set", "a connection rate runs HTTP/1.1 and HTTP/3 only (HTTP/2 connection rates are not built yet)")
	}
	if p.MaxStreams > 1 {
		bad("max_streams", fmt.Sprint(p.MaxStreams), "a connection-rate connection sends its requests one after another (requests_per_connection): leave max_streams at 1")
	}
	if p.NoKeepAlive {
		bad("keepalive", "false", "a connection-rate plan already opens a connection per ticket: set requests_per_connection instead")
	}
	if p.Requests > 0 {
		bad("requests", fmt.Sprint(p.Requests), "count mode does not combine with a connection rate")
	}
	return errs
}

// connRate sets p's connection-rate fields from the plan file's keys
// (docs/plan.md): cps (new connections/s across the cluster, in place of
// rate; stages then ramp cps), requests_per_connection (default 1; 0 is
// the handshake only), max_open (the cap on connections open at once, in
// place of max_connections), close (fin, the default, or rst), source_ips
// and tls.resume_ratio (which implies tls.resume, as --resume-ratio does).
// requests_per_connection and max_open need cps in the same file. Errors
// name the key (*FieldError), every problem joined.
func (f *File) connRate(p *Plan) error {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	cps := f.CPS != 0
	for _, s := range f.Stages {
		cps = cps || s.CPS != 0
	}
	switch {
	case f.CPS < 0:
		bad("cps", fmt.Sprint(f.CPS), "want a rate above 0 new connections/s")
	case cps && f.Rate != 0:
		bad("rate", fmt.Sprint(f.Rate), "a connection-rate plan (cps) has no request rate: choose cps (new connections/s) or rate (requests/s)")
	}
	for i, s := range f.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		switch {
		case s.CPS < 0:
			bad(field+".cps", fmt.Sprint(s.CPS), "want 0 or more new connections/s")
		case cps && s.Rate != 0:
			bad(field+".rate", fmt.Sprint(s.Rate), "a connection-rate plan (cps) ramps cps, not rate")
		}
		if cps {
			p.Stages[i].Rate = s.CPS
		}
	}
	if cps {
		p.ConnectionRate, p.Rate, p.RequestsPerConnection = true, f.CPS, 1
		if f.RequestsPerConnection != nil {
			p.RequestsPerConnection = *f.RequestsPerConnection
		}
		switch {
		case f.MaxOpen < 0:
			bad("max_open", fmt.Sprint(f.MaxOpen), "want the connections open at once across the cluster, above 0")
		case f.MaxOpen > 0 && f.MaxConnections != 0:
			bad("max_open", fmt.Sprint(f.MaxOpen), "max_connections is set too: choose one (max_open is the connection-rate name)")
		case f.MaxOpen > 0:
			p.MaxConnections = f.MaxOpen
		}
	} else {
		if f.RequestsPerConnection != nil {
			bad("requests_per_connection", fmt.Sprint(*f.RequestsPerConnection), "only with cps: a connection-rate plan closes each connection after this many requests")
		}
		if f.MaxOpen != 0 {
			bad("max_open", fmt.Sprint(f.MaxOpen), "only with cps; a request-rate plan caps its connections with max_connections")
		}
	}
	switch f.Close {
	case "", "fin":
	case "rst":
		p.CloseReset = true
	default:
		bad("close", fmt.Sprintf("%q", f.Close), "want fin (the default) or rst (a TCP reset: no TIME_WAIT on the client)")
	}
	p.SourceIPs = f.SourceIPs
	if f.TLS.ResumeRatio != 0 {
		p.TLS.Resume, p.TLS.ResumeRatio = true, f.TLS.ResumeRatio
	}
	return errors.Join(errs...)
}

// defaultMaxOpen is a connection-rate plan's cap on connections open at
// once when none is set (max_open, --max-open): the larger of Connections
// and the highest rate of the plan and its stages, in connections/s (at
// most 2^20), so that connections lasting up to a second never wait.
func (p *Plan) defaultMaxOpen() int {
	peak := p.Rate
	for _, s := range p.Stages {
		peak = max(peak, s.Rate)
	}
	return max(p.Connections, int(min(peak, 1<<20)))
}

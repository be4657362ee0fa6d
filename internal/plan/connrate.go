package plan

import (
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
	if p.Protocol != H1 {
		bad("cps", "set", "a connection rate runs HTTP/1.1 only (HTTP/2 connection rates are not built yet)")
	}
	if p.NoKeepAlive {
		bad("keepalive", "false", "a connection-rate plan already opens a connection per ticket: set requests_per_connection instead")
	}
	if p.Requests > 0 {
		bad("requests", fmt.Sprint(p.Requests), "count mode does not combine with a connection rate")
	}
	return errs
}

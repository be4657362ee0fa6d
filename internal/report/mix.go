package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// writeMix writes each request of a mix apart, under the totals: its
// completed responses, latency p50 and p99, errors, and status codes (with
// the error kinds).
func (r *Report) writeMix(p *printer) {
	if len(r.Mix) == 0 {
		return
	}
	// The METHOD and URL columns are as wide as their longest entry (at
	// least 7 and 32): a longer URL would push its row's figures out of
	// their columns. fmt pads by runes, as utf8.RuneCountInString counts.
	mw, uw := 7, 32
	for _, m := range r.Mix {
		mw, uw = max(mw, utf8.RuneCountInString(m.Method)), max(uw, utf8.RuneCountInString(m.URL))
	}
	p.f("Mix:\n")
	p.f("  %-3s %-*s %-*s %10s %9s %9s %8s %s\n", "#", mw, "METHOD", uw, "URL", "REQUESTS", "p50", "p99", "ERRORS", "STATUS")
	for _, m := range r.Mix {
		p50, p99 := "-", "-"
		if m.Latency != nil {
			p50, p99 = fmtUs(float64(m.Latency.P50)), fmtUs(float64(m.Latency.P99))
		}
		status := fmtMap(m.Status)
		if len(m.Errors) > 0 {
			status = strings.TrimPrefix(status+"; errors "+fmtMap(m.Errors), "; ")
		}
		if status == "" {
			status = "-"
		}
		p.f("  %-3d %-*s %-*s %10d %9s %9s %8d %s\n", m.Index, mw, m.Method, uw, m.URL, m.Requests, p50, p99, sum(m.Errors), status)
	}
	if r.MixAgents < len(r.AgentRows) {
		p.f("  %s\n", fmt.Sprintf("(over %d of %d agents: the others ended before their results; their requests are in the totals only)",
			r.MixAgents, len(r.AgentRows)))
	}
}

package report

import (
	"fmt"
	"sort"
	"strings"
)

// Warnings returns what a reader must know before trusting the report's
// figures, one sentence each, for the top of the text report (after its
// header). Three today: every completed response had a status outside
// 200-399 (a wrong path or host answering 404, a server refusing with 403
// or 503), so the latency and RPS measure error pages, not the service;
// and no request completed at all, only errors (wrk prints both kinds of
// run with only a "Non-2xx or 3xx responses" or "Socket errors" line near
// its end, and exits 0, as coordctl does: thresholds fail a run). When
// those errors are all truncated or protocol ones on an http:// URL sent
// as HTTP/1.1, the server may be one that speaks only HTTP/2 over clear
// text (h2c prior knowledge, RFC 9113 section 3.3), and the warning says
// to try --http2. And a --resume-ratio that reached under half the
// handshakes it planned to (a keep-alive closed loop offers a session only
// on a reconnect).
func (r *Report) Warnings() []string {
	var out []string
	if n := r.ErrorTotal(); r.Requests == 0 && n > 0 {
		w := fmt.Sprintf("no request completed: %s (%s): every figure below is of failures", plural(n, "error"), statusList(r.Errors))
		if r.Errors["truncated"]+r.Errors["protocol"] == n && strings.HasPrefix(r.Target, "http://") && r.MaxStreams == 0 {
			w += "; the server may speak only HTTP/2 (h2c): try --http2"
		}
		out = append(out, w)
	}
	if r.Requests > 0 && r.Non2xx3xx == r.Requests {
		out = append(out, fmt.Sprintf("every response (%d) had a status outside 200-399 (%s): the figures below measure error responses; check the URL, the Host header and the server",
			r.Requests, statusList(r.Status)))
	}
	if h := r.Handshakes; h.ResumeRatioPlanned > 0 && h.Full+h.Resumed > 0 && float64(h.Offered) < h.ResumeRatioPlanned*float64(h.Full+h.Resumed)/2 {
		out = append(out, fmt.Sprintf("--resume-ratio %g: only %d of %s offered a session: a session is offered only by a connection opened after one was cached, so with keep-alive connections only reconnects can resume and the ratio applies to few or no handshakes (use --no-keepalive or --cps; TLS 1.3 caches a session only once a response was read)",
			h.ResumeRatioPlanned, h.Offered, plural(h.Full+h.Resumed, "handshake")))
	}
	return out
}

// deref is *f, 0 for nil.
func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// statusList writes status (or error kind) counts as "404 ×120, 503 ×3",
// most frequent first (ties by code).
func statusList(status map[string]int64) string {
	codes := make([]string, 0, len(status))
	for c := range status {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool {
		if status[codes[i]] != status[codes[j]] {
			return status[codes[i]] > status[codes[j]]
		}
		return codes[i] < codes[j]
	})
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s ×%d", c, status[c])
	}
	return strings.Join(parts, ", ")
}

// writeWarnings prints Warnings, each on a line of its own starting
// "WARNING: ", after the header (the live run prints the header at its
// start and the rest after the run: both show them in the same place).
func (r *Report) writeWarnings(p *printer) {
	for _, w := range r.Warnings() {
		p.f("WARNING: %s\n", w)
	}
}

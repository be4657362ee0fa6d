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
// on a reconnect). An open loop whose sends were at least 1 % never sent
// (Unsent: every connection busy to the window's end), whose percentiles
// leave out what would have been its slowest requests. And a window too
// short for its latency (ShortWindow).
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
	if sched := r.scheduled(); r.Mode == "open" && r.Unsent > 0 && sched > 0 && float64(r.Unsent) >= 0.01*float64(sched) {
		what := "sends"
		if r.ConnectionRate != nil {
			what = "connection starts"
		}
		out = append(out, fmt.Sprintf("%d of the %d scheduled %s (%.1f %%) never left (every connection busy until the window's end): no percentile holds them, and each would have taken at least its wait to the window's end, so the latency percentiles are lower bounds",
			r.Unsent, sched, what, 100*float64(r.Unsent)/float64(sched)))
	}
	if share, ok := r.ShortWindow(); ok {
		out = append(out, fmt.Sprintf("the mean latency (%s) is %.1f %% of the %s window and there was no warm-up: each connection's first response came a latency after the start, and %d requests were in flight at the end, so the RPS (completed requests / window) undercounts the steady rate by up to about %.1f %%; give a longer -d or a --warmup",
			fmtUs(r.Latency.Mean), 100*share, fmtSeconds(r.DurationS), r.InFlight, 100*share))
	}
	return out
}

// ShortWindowShare is the latency-to-window ratio from which ShortWindow
// warns.
const ShortWindowShare = 0.01

// ShortWindow reports whether the window was short for the run's latency:
// no warm-up, requests still in flight at its end, and the mean latency at
// least ShortWindowShare of the window (share: mean latency / window).
// Its RPS (completed requests / window) then undercounts the steady rate
// by up to about share: the connections start empty, so each one's first
// response comes a latency after the start, and what it would have
// completed in that latency is in flight at the end (a closed loop of 4
// connections on a 100 ms server over 1 s completes 36, not 40). wrk and
// h2load count the same way and say nothing.
func (r *Report) ShortWindow() (share float64, ok bool) {
	if r.Requests == 0 || r.Warmup != nil || r.InFlight == 0 || r.Latency == nil || r.DurationS <= 0 {
		return 0, false
	}
	share = r.Latency.Mean / (r.DurationS * 1e6)
	return share, share >= ShortWindowShare
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

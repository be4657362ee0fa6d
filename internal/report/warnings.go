package report

import (
	"fmt"
	"sort"
	"strings"
)

// Warnings returns what a reader must know before trusting the report's
// figures, one sentence each, for the top of the text report. Today one:
// every completed response had a status outside 200-399 (a wrong path or
// host answering 404, a server refusing with 403 or 503), so the latency
// and RPS measure error pages, not the service: wrk prints such a run with
// only a "Non-2xx or 3xx responses" line near its end.
func (r *Report) Warnings() []string {
	var out []string
	if r.Requests > 0 && r.Non2xx3xx == r.Requests {
		out = append(out, fmt.Sprintf("every response (%d) had a status outside 200-399 (%s): the figures below measure error responses; check the URL, the Host header and the server",
			r.Requests, statusList(r.Status)))
	}
	return out
}

// statusList writes status counts as "404 ×120, 503 ×3", most frequent
// first (ties by code).
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
// "WARNING: ", before the rest of the text report.
func (r *Report) writeWarnings(p *printer) {
	for _, w := range r.Warnings() {
		p.f("WARNING: %s\n", w)
	}
}

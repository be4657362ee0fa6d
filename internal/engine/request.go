package engine

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"

	"github.com/phalanxload/phalanx/internal/plan"
)

// entry is one request of the mix, serialized once for HTTP/1.1 and kept in
// parts for HTTP/2.
type entry struct {
	method  string
	uri     string // request target (path and query)
	headers []plan.Header
	body    []byte
	h1      []byte              // the whole HTTP/1.1 request, written as is
	h2      []hpack.HeaderField // the HTTP/2 header fields (h2hpack.go)
	h3      *http.Request       // the HTTP/3 request, reused (h3.go)
	idx     int                 // the entry's index in the mix
	head    bool
	target  plan.Target // its URL, the base of a redirect's Location
	isHop   bool        // a redirect hop's (redirect.go): no cached HTTP/2 block
}

// buildEntries serializes the plan's requests and returns the weighted
// round-robin schedule: entry indexes in smooth weighted round-robin order
// (nginx's algorithm), so that any whole cycle through it holds each
// request in exact proportion to its weight. In count mode a request's
// position is its global index (Engine.countEntry); otherwise each
// connection cycles through it from its own offset. targets are the
// requests' parsed URLs (plan.Parsed.Entries), in p.Entries' order.
func buildEntries(p plan.Plan, targets []plan.Target) ([]entry, []uint16, error) {
	reqs := p.Entries()
	if len(targets) != len(reqs) {
		return nil, nil, fmt.Errorf("%d request targets for %d requests", len(targets), len(reqs))
	}
	if len(reqs) > 1<<16 {
		return nil, nil, fmt.Errorf("request mix has %d entries: at most 65536", len(reqs))
	}
	var entries []entry
	for i, r := range reqs {
		t := targets[i]
		en := entry{method: r.Method, uri: t.RequestURI, headers: r.Headers, body: r.Body, head: r.Method == "HEAD", idx: i, target: t}
		en.h1 = buildRequest(p, t, r)
		switch p.Protocol {
		case plan.H2:
			en.h2 = buildH2Fields(t, r)
		case plan.H3:
			en.h3 = buildH3Request(t, r)
		}
		entries = append(entries, en)
	}
	// Smooth weighted round-robin (nginx's), over the weights divided by
	// their common divisor: the same order, with the shortest period.
	weights := plan.RoundRobinWeights(reqs)
	total := 0
	for _, w := range weights {
		total += w
	}
	sched := make([]uint16, 0, total)
	if total == len(reqs) { // equal weights: each request in turn
		for i := range reqs {
			sched = append(sched, uint16(i))
		}
		return entries, sched, nil
	}
	if total > plan.MaxMixPeriod || int64(total)*int64(len(reqs)) > plan.MaxMixWork {
		return nil, nil, fmt.Errorf("request mix of %d requests with weights summing to %d: at most %d steps", len(reqs), total, plan.MaxMixWork)
	}
	current := make([]int, len(reqs))
	for range total {
		best := 0
		for i, w := range weights {
			current[i] += w
			if current[i] > current[best] {
				best = i
			}
		}
		current[best] -= total
		sched = append(sched, uint16(best))
	}
	return entries, sched, nil
}

// buildRequest serializes one HTTP/1.1 request. The Host header is the
// URL's (a Host header in the plan overrides it); Content-Length is set from
// the body; with NoKeepAlive, Connection: close is sent unless the plan sets
// a Connection header.
func buildRequest(p plan.Plan, t plan.Target, r plan.Request) []byte {
	b := make([]byte, 0, 256+len(r.Body))
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, t.RequestURI...)
	b = append(b, " HTTP/1.1\r\n"...)
	var hasHost, hasUA, hasConn bool
	for _, h := range r.Headers {
		switch {
		case equalFold(h.Name, "host"):
			hasHost = true
		case equalFold(h.Name, "user-agent"):
			hasUA = true
		case equalFold(h.Name, "connection"):
			hasConn = true
		}
	}
	if !hasHost {
		b = append(b, "Host: "...)
		b = append(b, t.HostHeader...)
		b = append(b, "\r\n"...)
	}
	if !hasUA {
		b = append(b, "User-Agent: phalanx/"...)
		b = append(b, Version...)
		b = append(b, "\r\n"...)
	}
	if p.NoKeepAlive && !hasConn {
		b = append(b, "Connection: close\r\n"...)
	}
	for _, h := range r.Headers {
		if equalFold(h.Name, "content-length") {
			continue // set from the body below
		}
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	if len(r.Body) > 0 || r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(r.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, r.Body...)
	return b
}

// equalFold compares a header name with a lowercase one; names are RFC
// 9110 tokens (validated), so ASCII and Unicode folding agree.
func equalFold(a, lower string) bool { return strings.EqualFold(a, lower) }

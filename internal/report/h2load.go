package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/phalanxload/phalanx/internal/hist"
)

// WriteH2load writes r as h2load's summary (nghttp2's h2load 1.52, from
// "finished in" on), so that scripts that parse h2load's output parse
// Phalanx's, then the run ID. The figures map as follows:
//
//   - requests: total is the plan's count (-n), else the sends scheduled
//     (issued plus, in open loop, those never sent); started the requests
//     issued; done those that ended (a response or an error); succeeded the
//     responses with a 2xx or 3xx status; failed the others done;
//     errored the requests that ended in an error (no response); timeout
//     the timeouts among them. Requests in flight when the window closed
//     are started, not done.
//   - traffic: total the response bytes on the wire (h2load's also counts
//     the connection's own frames, SETTINGS and the like: some dozens of
//     bytes per connection), headers the header sections as on the wire
//     (HTTP/2: the HPACK blocks, as h2load), data the bodies as received;
//     space savings 1 - headers / the fields decoded. Against NGINX over
//     h2c the headers, savings and data equal h2load's to the byte.
//   - time for request: the latency from each request's send (in open
//     loop the service time, from the actual send, as h2load measures it);
//     time for connect: each new connection's TCP connect; time to 1st
//     byte is h2load's per client (from its connect's start to the first
//     response byte on it), which Phalanx does not measure (its TTFB phase
//     is per request, from the request's write): the row is "-".
//   - req/s: h2load's is per client (each client's requests over its
//     time). In a closed loop, whose connections all run the whole window,
//     the clients' mean is RPS / connections, exact; the min, max and sd
//     across clients are not measured ("-"). In open loop, with --cps
//     and with stages (connections ramped) the row is "-".
//
// Durations are h2load's: whole microseconds below 1 ms ("572us"), else
// ms or s with two decimals. A figure without samples is "-".
func (r *Report) WriteH2load(w io.Writer) error {
	p := &printer{w: w}
	p.f("finished in %s, %.2f req/s, %s/s\n", fmtH2Duration(r.DurationS*1e6), r.RPS, fmtBytes(r.TransferBps))
	total := r.PlanRequests
	if total == 0 {
		total = r.Issued + r.Unsent
	}
	var classes [6]int64
	for code, n := range r.Status {
		if c, err := strconv.Atoi(code); err == nil && c >= 100 && c < 600 {
			classes[c/100] += n
		}
	}
	succeeded := classes[2] + classes[3]
	errored := r.ErrorTotal()
	done := r.Requests + errored
	p.f("requests: %d total, %d started, %d done, %d succeeded, %d failed, %d errored, %d timeout\n",
		total, r.Issued, done, succeeded, done-succeeded, errored, r.Errors["timeout"])
	p.f("status codes: %d 2xx, %d 3xx, %d 4xx, %d 5xx\n", classes[2], classes[3], classes[4], classes[5])
	savings := 0.0
	if r.HeaderFieldBytes > 0 {
		savings = 100 * (1 - float64(r.HeaderBytes)/float64(r.HeaderFieldBytes))
	}
	p.f("traffic: %s (%d) total, %s (%d) headers (space savings %.2f%%), %s (%d) data\n",
		fmtBytes(float64(r.BytesRead)), r.BytesRead, fmtBytes(float64(r.HeaderBytes)), r.HeaderBytes, savings,
		fmtBytes(float64(r.BodyBytes)), r.BodyBytes)
	p.f("                     min         max         mean         sd        +/- sd\n")
	request, within := r.Latency, r.WithinStdevPct.Latency
	if r.Mode == "open" {
		request, within = r.ServiceTimeUs, r.WithinStdevPct.Service
	}
	for _, row := range []struct {
		label  string
		s      *hist.Summary
		within float64
	}{
		{"time for request:", request, within},
		{"time for connect:", r.ConnectUs, r.WithinStdevPct.Connect},
		{"time to 1st byte:", nil, 0}, // h2load's per client: not measured
	} {
		if row.s == nil {
			p.f("%s %10s  %10s  %10s  %10s%10s\n", row.label, "-", "-", "-", "-", "-")
			continue
		}
		p.f("%s %10s  %10s  %10s  %10s%9.2f%%\n", row.label, fmtH2Duration(float64(row.s.Min)), fmtH2Duration(float64(row.s.Max)),
			fmtH2Duration(row.s.Mean), fmtH2Duration(row.s.Stdev), row.within)
	}
	if r.Mode == "closed" && len(r.Stages) == 0 && r.Connections > 0 && r.Requests > 0 {
		p.f("req/s           : %10s  %10s  %10.2f  %10s%10s\n", "-", "-", r.RPS/float64(r.Connections), "-", "-")
	} else {
		p.f("req/s           : %10s  %10s  %10s  %10s%10s\n", "-", "-", "-", "-", "-")
	}
	p.f("Run ID: %s\n", r.runIDText())
	return p.err
}

// fmtH2Duration formats microseconds as h2load's util::format_duration:
// whole microseconds under 1 ms, else as wrk does (ms or s with two
// decimals).
func fmtH2Duration(us float64) string {
	if us < 1000 {
		return fmt.Sprintf("%.0fus", us)
	}
	return fmtUs(us)
}

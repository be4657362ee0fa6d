package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TextOptions selects optional text sections.
type TextOptions struct {
	// Latency prints the percentile distribution (wrk's --latency).
	Latency bool
	// NoHeader leaves out the "Running ... @ URL" header, printed by
	// WriteHeader when the run started.
	NoHeader bool
}

// Header is what the text report's first lines say, known when the run
// starts: wrk's "Running 10s test @ URL" and "N threads and M connections",
// agents being Phalanx's threads.
type Header struct {
	Target string
	// Duration is the planned window (-d); Requests the planned count (-n),
	// which the header names instead when set, with Duration as its bound
	// ("Running 500000-request test (at most 2s) @ URL") when both are.
	Duration    time.Duration
	Requests    int64
	Agents      int
	Connections int64
	// ConnectionRate is set for a connection-rate run (--cps), whose
	// bound is not Connections but MaxOpen (--max-open: connections open
	// at once); CPS is its target in connections/s across the cluster (0
	// with stages: the header then says the rate is staged).
	ConnectionRate bool
	CPS            float64
	MaxOpen        int64
}

// WriteHeader writes h as the report's first two lines (wrk's layout).
func WriteHeader(w io.Writer, h Header) error {
	p := &printer{w: w}
	p.header(h)
	return p.err
}

func (p *printer) header(h Header) {
	if h.Requests > 0 && h.Duration > 0 { // count mode with -d: whichever comes first (docs/plan.md)
		p.f("Running %d-request test (at most %s) @ %s\n", h.Requests, fmtWindow(h.Duration.Seconds()), h.Target)
	} else if h.Requests > 0 {
		p.f("Running %d-request test @ %s\n", h.Requests, h.Target)
	} else {
		p.f("Running %s test @ %s\n", fmtWindow(h.Duration.Seconds()), h.Target)
	}
	if !h.ConnectionRate {
		p.f("  %s and %s\n", plural(int64(h.Agents), "agent"), plural(h.Connections, "connection"))
		return
	}
	rate := fmt.Sprintf("target %.2f connections/sec", h.CPS)
	if h.CPS == 0 {
		rate = "a staged connection rate (connections/sec)"
	}
	bound := "no bound on connections open at once"
	if h.MaxOpen > 0 {
		bound = fmt.Sprintf("at most %s open at once (--max-open)", plural(h.MaxOpen, "connection"))
	}
	p.f("  %s, %s, %s\n", plural(int64(h.Agents), "agent"), rate, bound)
}

// WriteText writes r in wrk's layout (wrk 4.1 with --latency: its labels,
// columns and units), agents taking the place of wrk's threads, then the
// cluster's own lines after Transfer/sec. Phalanx's notes on the run
// (stopped early, lost agents, open loop, HTTP/2) follow the header, where
// wrk2 prints its calibration lines.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	p := &printer{w: w}
	if !o.NoHeader {
		window := r.PlanDurationS // in count mode, the -d bound or none
		if window == 0 && r.PlanRequests == 0 {
			window = r.DurationS
		}
		h := Header{Target: r.Target, Duration: time.Duration(window * float64(time.Second)), Requests: r.PlanRequests,
			Agents: r.AgentCount, Connections: r.Connections}
		if cr := r.ConnectionRate; cr != nil {
			h.ConnectionRate, h.CPS, h.MaxOpen = true, cr.TargetCPS, cr.MaxOpen
		}
		p.header(h)
	}
	r.writeWarnings(p) // right after the header, whether it is printed here or was at the start
	if r.StoppedEarly {
		of := ""
		if r.PlanDurationS > 0 {
			of = " of " + fmtWindow(r.PlanDurationS)
		}
		p.f("  Stopped early by the user after %s%s\n", fmtSeconds(r.DurationS), of)
	}
	r.writeLosses(p)
	r.writeAbort(p)
	if r.Mode == "open" {
		if cr := r.ConnectionRate; cr != nil {
			p.f("  connection rate%s; %s per connection; latency from each connection's intended start\n", r.targetText(cr.TargetCPS, "connections/sec"), plural(int64(cr.RequestsPerConnection), "request"))
		} else {
			p.f("  open loop%s; latency from each request's intended send time\n", r.targetText(r.TargetRPS, "requests/sec"))
		}
		if r.PacingWindowUs > 0 {
			p.f("  paced in %v windows: each intended send time rounded down to a multiple of the window, so sends due in one window leave together\n", time.Duration(r.PacingWindowUs)*time.Microsecond)
		}
		if r.PacingSpin {
			what := "send's"
			if r.ConnectionRate != nil {
				what = "connection start's"
			}
			p.f("  paced with a spin: each %s timer wait ended up to %v early and the agent spun to the intended time\n", what, plan.SpinLead)
		}
	}
	if r.MaxStreams > 0 {
		p.f("  HTTP/2, %s per connection\n", plural(int64(r.MaxStreams), "concurrent stream"))
	}
	if r.HTTP3 {
		p.f("  HTTP/3 over QUIC, 1 request at a time per connection\n")
	}
	if r.Close == "rst" {
		p.f("  connections closed by a TCP reset (--close rst)\n")
	}
	// Without a latency sample: said once, plainly. A run with errors
	// only was already warned "no request completed" above.
	if r.Latency == nil && (r.Requests > 0 || r.ErrorTotal() == 0) {
		p.f("  Latency: %s\n", r.noLatency())
	}
	r.writeWrk(p, o)
	r.writeCluster(p)
	return p.err
}

// writeWrk writes wrk's block, from "Thread Stats" to "Transfer/sec", in
// wrk.c's formats (print_stats_header, print_stats, print_units,
// print_stats_latency).
func (r *Report) writeWrk(p *printer, o TextOptions) {
	// Without samples every figure is unknown ("-"), never 0.00us or
	// wrk's -nan%.
	p.f("  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev")
	if lat := r.Latency; lat != nil {
		p.f("    %-10s%s%s%s%8.2f%%\n", "Latency", wrkUnits(fmtUs(lat.Mean), 8), wrkUnits(fmtUs(lat.Stdev), 10),
			wrkUnits(fmtUs(float64(lat.Max)), 9), r.WithinStdevPct.Latency)
	} else {
		p.f("    %-10s%8s%10s%9s%8s\n", "Latency", "-", "-", "-", "-")
	}
	if rps := r.ReqPerSec; rps != nil {
		p.f("    %-10s%s%s%s%8.2f%%\n", "Req/Sec", wrkUnits(fmtMetric(rps.Mean), 8), wrkUnits(fmtMetric(rps.Stdev), 10),
			wrkUnits(fmtMetric(rps.Max), 9), rps.WithinStdevPct)
	} else {
		p.f("    %-10s%8s%10s%9s%8s\n", "Req/Sec", "-", "-", "-", "-")
	}
	if o.Latency && r.Latency == nil {
		// No percentile table of dashes: there is no distribution.
		p.f("  Latency Distribution: none (%s)\n", r.noLatency())
	} else if o.Latency {
		p.f("  Latency Distribution\n")
		lat := r.Latency
		for _, q := range []struct {
			label string
			v     func(*hist.Summary) int64
		}{
			{"50", func(s *hist.Summary) int64 { return s.P50 }}, {"75", func(s *hist.Summary) int64 { return s.P75 }},
			{"90", func(s *hist.Summary) int64 { return s.P90 }}, {"99", func(s *hist.Summary) int64 { return s.P99 }},
			{"99.9", func(s *hist.Summary) int64 { return s.P999 }}, {"99.99", func(s *hist.Summary) int64 { return s.P9999 }},
		} {
			p.f("%7s%%%s\n", q.label, wrkUnits(fmtUs(float64(q.v(lat))), 10))
		}
	}
	p.f("  %d requests in %s, %s read\n", r.Requests, fmtSeconds(r.DurationS), fmtBytes(float64(r.BytesRead)))
	if se := r.SocketErrors(); se != (SocketErrors{}) {
		p.f("  Socket errors: connect %d, read %d, write %d, timeout %d\n", se.Connect, se.Read, se.Write, se.Timeout)
	}
	if n := r.ErrorTotal(); n > 0 {
		p.f("  Errors: %d (%s)\n", n, fmtMap(r.Errors))
		if r.Errors["ports"] > 0 {
			p.f("  ports: %s\n", measure.PortsAdvice)
		}
	}
	if r.Non2xx3xx > 0 {
		p.f("  Non-2xx or 3xx responses: %d\n", r.Non2xx3xx)
	}
	p.f("Requests/sec: %9.2f\n", r.RPS)
	p.f("Transfer/sec: %10sB\n", strings.TrimSuffix(fmtBytes(r.TransferBps), "B"))
}

// noLatency says why a report has no latency figure: no request
// completed in the window, or (responses but no sample) none recorded.
func (r *Report) noLatency() string {
	if r.Requests == 0 {
		return "no request completed in the window"
	}
	return "no samples"
}

// writeCluster writes Phalanx's lines after wrk's block: status codes,
// phases, connections, TLS, compression, open-loop and stage figures,
// skew, warm-up, the client-bound warning and the agents.
func (r *Report) writeCluster(p *printer) {
	if r.notAll200() {
		p.f("Status codes: %s\n", fmtMap(r.Status))
	}
	r.writeOK(p)
	r.writeMix(p)
	phases := []struct {
		name string
		s    *hist.Summary
	}{{"Service", r.ServiceTimeUs}, {"Lateness", r.SendLatenessUs}, {"Handshake lat", r.HandshakeLatencyUs}, {"Connect", r.ConnectUs}, {"TLS full", r.TLSHandshakeFullUs}, {"TLS resumed", r.TLSHandshakeResumedUs}, {"TTFB", r.TTFBUs}}
	header := false
	for _, ph := range phases {
		if ph.s == nil {
			continue
		}
		if !header {
			p.f("Phases:%17s %9s %9s %9s %8s\n", "Avg", "p50", "p99", "Max", "Count")
			header = true
		}
		p.f("  %-13s %9s %9s %9s %9s %8d\n", ph.name, fmtUs(ph.s.Mean), fmtUs(float64(ph.s.P50)), fmtUs(float64(ph.s.P99)), fmtUs(float64(ph.s.Max)), ph.s.Count)
	}
	p.f("Connections:  %s opened, %s", plural(r.ConnectionsOpened, "connection"), plural(r.Reconnects, "reconnect"))
	if r.Handshakes.Full+r.Handshakes.Resumed > 0 {
		h := r.Handshakes
		p.f("; TLS handshakes: %d full, %d resumed", h.Full, h.Resumed)
		if h.Refused > 0 {
			p.f(", %d offered but refused", h.Refused)
		}
		if h.ResumeRatioPlanned > 0 {
			p.f(" (resumed %.1f %%; offered a session %d of %d, %.1f %%, against --resume-ratio %g)", 100*h.ResumeRatioAchieved,
				h.Offered, h.Full+h.Resumed, 100*deref(h.ResumeRatioOffered), h.ResumeRatioPlanned)
		}
		if h.EarlyOffered > 0 {
			p.f("; 0-RTT: %d offered, %d accepted, %d rejected", h.EarlyOffered, h.EarlyAccepted, h.EarlyRejected)
		}
	}
	if r.Retries > 0 {
		p.f("; %s", pluralOf(r.Retries, "retry", "retries"))
	}
	if r.Redirects > 0 {
		p.f("; %s followed", plural(r.Redirects, "redirect"))
	}
	p.f("\n")
	if len(r.TLS.Version) > 0 {
		p.f("TLS:          ")
		if len(r.TLS.Transport) > 0 {
			p.f("%s; ", fmtCounts(r.TLS.Transport))
		}
		p.f("%s; %s; %s", fmtCounts(r.TLS.Version), fmtCounts(r.TLS.Cipher), fmtCounts(r.TLS.Group))
		if len(r.TLS.ALPN) > 0 {
			p.f("; ALPN %s", fmtCounts(r.TLS.ALPN))
		}
		p.f(" (connections)\n")
	}
	if r.Requests > 0 {
		p.f("Content:      %s; body %s of %s on the wire (headers %s)\n", fmtCounts(r.ContentEncoding),
			fmtBytes(float64(r.BodyBytes)), fmtBytes(float64(r.BytesRead)), fmtBytes(float64(r.HeaderBytes)))
	}
	if r.InFlight > 0 {
		p.f("In flight:    %s when the window closed (not counted above)\n", plural(r.InFlight, "request"))
	}
	if r.Mode == "open" {
		label := "Target"
		missLimit := fmtUs(float64(measure.MissThreshold.Microseconds()))
		if len(r.Stages) > 0 {
			label = "Mean target"
		}
		never := ""
		if r.Backlogged > 0 {
			never = fmt.Sprintf(", %d of them for a busy connection", r.Backlogged)
		}
		if r.Unsent > 0 {
			never += fmt.Sprintf(", %d of them never sent", r.Unsent)
		}
		if r.GrowthRefused > 0 {
			capFlag := "--max-connections"
			if r.ConnectionRate != nil {
				capFlag = "--max-open"
			}
			never += fmt.Sprintf("; %d found every connection busy at the %s cap (growth refused)", r.GrowthRefused, capFlag)
		}
		if r.Queued > 0 {
			never += fmt.Sprintf("; %d waited for a busy connection", r.Queued)
		}
		if r.Carried > 0 {
			never += fmt.Sprintf("; %d sends of the warm-up ended in the window", r.Carried)
		}
		if r.ClientLate > 0 {
			never += fmt.Sprintf("; %d left over %s late by the agents' own delay", r.ClientLate, fmtUs(float64(LatenessLimit.Microseconds())))
		}
		if cr := r.ConnectionRate; cr != nil {
			p.f("Conn rate:    %s %.2f connections/sec%s, achieved %.2f (%s); %s over %s late (missed)%s\n", label, cr.TargetCPS, r.lossTarget(), cr.CPS, plural(cr.Connections, "connection"), plural(r.Missed, "start"), missLimit, never)
		} else {
			p.f("Open loop:    %s %.2f requests/sec%s, achieved %.2f; %s started over %s late (missed)%s\n", label, r.TargetRPS, r.lossTarget(), r.RPS, plural(r.Missed, "send"), missLimit, never)
		}
	}
	if len(r.Stages) > 0 {
		p.f("%-8s %8s %8s %16s %10s %9s %9s %7s\n", "Stages:", "Start", "Length", "Target", "REQ/S", "p50", "p99", "Errors")
		for _, st := range r.Stages {
			p50, p99 := "-", "-"
			if st.Latency != nil {
				p50, p99 = fmtUs(float64(st.Latency.P50)), fmtUs(float64(st.Latency.P99))
			}
			p.f("  %-6d %7.2fs %7.2fs %7d → %-6d %10.2f %9s %9s %7d\n", st.Index, st.StartS, st.DurationS, st.TargetFrom, st.TargetTo, st.RPS, p50, p99, sum(st.Errors))
		}
	}
	if r.CoordinatorLost == "" {
		skew, across := "-", "agents"
		if !r.StartSkewUnknown {
			skew = fmtUs(r.StartSkewUs)
		}
		known := 0
		for _, a := range r.AgentRows {
			if !a.StartOffsetUnknown {
				known++
			}
		}
		if known < len(r.AgentRows) {
			across = fmt.Sprintf("the %d of %d agents whose first send is known", known, len(r.AgentRows))
		}
		bound := ""
		if r.StartSkewBoundUs > 0 { // 0 unless two agents' first sends are known
			// What the agents' clock samples leave unknown: a skew below
			// it is not told apart from none.
			bound = fmt.Sprintf(" (± %s: the agents' clock samples)", fmtUs(r.StartSkewBoundUs))
		}
		p.f("Start skew:   %10s across %s%s\n", skew, across, bound)
	}
	if w := r.Warmup; w != nil {
		p.f("Warm-up:      %s, %s, %s (excluded above)\n", fmtSeconds(w.DurationS), plural(w.Requests, "request"), plural(sum(w.Errors), "error"))
	}
	if r.ClientBound {
		p.f("WARNING: client-bound: %s; these numbers may measure the load generators, not the server\n", strings.Join(r.ClientBoundReasons, "; "))
	}
	if r.ServerBound {
		p.f("Server-bound: %s: the server is the limit, not the load generators\n", strings.Join(r.ServerBoundReasons, "; "))
	}
	if r.Stall != "" {
		p.f("Stall: %s\n", r.Stall)
	}
	r.writeThresholds(p)
	if r.CoordinatorLost != "" {
		p.f("Agents: not known (the coordinator was lost)\nRun ID: %s\n", r.runIDText())
		return
	}
	p.f("Agents:\n")
	p.f("  %-20s %6s %10s %10s %7s %8s %10s %10s %s\n", "NAME", "CONNS", "REQUESTS", "REQ/S", "CPU", "ERRORS", "START", "OFFSET", "PINNED")
	for _, a := range r.AgentRows {
		pinned := a.CPUList
		if pinned == "" {
			pinned = "-"
		}
		start := "-"
		switch {
		case !a.StartOffsetUnknown:
			start = fmtSignedUs(a.StartOffsetUs)
		case a.Lost:
			start = "lost"
		}
		p.f("  %-20s %6d %10d %10.2f %6.1f%% %8d %10s %10s %s\n", a.Name, a.Connections, a.Requests, a.RPS, 100*a.CPUUtil, a.Errors, start, fmtSignedUs(a.ClockOffsetUs), pinned)
		if a.Error != "" {
			p.f("    ! %s%s (its measurements until then are included)\n", r.lostText(a), a.Error)
		}
	}
	r.writeProvenance(p)
	p.f("Run ID: %s\n", r.runIDText())
}

// lostText is what an agent row's error line says first of a lost agent:
// when it was lost and, when its first send is not known, whether that was
// before the load's start (the start instant, the warm-up's start) or
// before it reported a send; "" for an agent not lost.
func (r *Report) lostText(a Agent) string {
	var warmupS float64
	if r.Warmup != nil {
		warmupS = r.Warmup.DurationS
	}
	switch {
	case !a.Lost:
		return ""
	case a.StartOffsetUnknown && a.LostAtS+warmupS <= 0:
		return "lost before the start: "
	case a.StartOffsetUnknown:
		return fmt.Sprintf("lost after %s, before reporting a send: ", fmtSeconds(a.LostAtS))
	}
	return fmt.Sprintf("lost after %s: ", fmtSeconds(a.LostAtS))
}

// runIDText is the run ID as the reports print it: with "(not stored)"
// when NotStored.
func (r *Report) runIDText() string {
	if r.NotStored {
		return r.RunID + " (not stored)"
	}
	return r.RunID
}

// notAll200 reports whether any completed response had a status other
// than 200 (a redirect too: never a silent success).
func (r *Report) notAll200() bool {
	for code, n := range r.Status {
		if code != "200" && n > 0 {
			return true
		}
	}
	return false
}

// SocketErrors are wrk's four error counters, mapped from Phalanx's error
// kinds as wrk counts its own: connect (connect, tls, local: wrk counts a
// failed handshake and a failed socket as connect errors), read (reset,
// closed, truncated, protocol, refused: wrk counts every failed read and
// parse as a read error), write (0: Phalanx counts a failed write by its
// cause, a reset or a close) and timeout.
type SocketErrors struct{ Connect, Read, Write, Timeout int64 }

// SocketErrors returns r's errors as wrk's counters.
func (r *Report) SocketErrors() SocketErrors {
	var se SocketErrors
	for kind, n := range r.Errors {
		switch kind {
		case "connect", "tls", "local", "ports":
			se.Connect += n
		case "timeout":
			se.Timeout += n
		default:
			se.Read += n
		}
	}
	return se
}

// writeLosses writes what made the run partial: each lost agent (when,
// how, its share), what the policy did, the coordinator's stall, and a
// report coordctl built after losing the coordinator.
func (r *Report) writeLosses(p *printer) {
	for _, l := range r.LostAgents {
		share := plural(l.Connections, "connection")
		if l.Rate > 0 {
			share += fmt.Sprintf(", %d requests/sec", l.Rate)
		}
		p.f("  Lost agent %s after %s: %s (its measurements cover %s; its share: %s)\n", l.Name, fmtSeconds(l.LostAtS), l.How(), fmtSeconds(l.RanS), share)
	}
	switch {
	case r.Aborted:
		p.f("  Aborted (on_agent_loss abort): every other agent was stopped at the loss; the window ends after %s\n", fmtSeconds(r.DurationS))
	case len(r.LostAgents) > 0 && r.OnAgentLoss == "continue":
		p.f("  Partial (on_agent_loss continue): the other agents ran on; the intervals without the lost agents are marked partial\n")
	case len(r.LostAgents) > 0:
		p.f("  Partial: the other agents were not stopped at the loss; the intervals without the lost agents are marked partial\n")
	}
	if r.CoordinatorStallS > 0 {
		p.f("  The coordinator stalled for %s: its agents stop their load after 2s without it\n", fmtSeconds(r.CoordinatorStallS))
	}
	if r.CoordinatorLost != "" {
		p.f("  Partial: %s; coordctl built this report from the %s it received (no phases, warm-up or agent rows)\n",
			r.CoordinatorLost, plural(int64(len(r.Timeline)), "interval"))
	}
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// wrkUnits pads a formatted number to width as wrk's print_units does:
// right-aligned, with room kept for a unit suffix of up to two letters,
// so that the numbers of a column line up whatever their units.
func wrkUnits(msg string, width int) string {
	pad := 2
	if n := len(msg); n > 0 && isLetter(msg[n-1]) {
		pad--
		if n > 1 && isLetter(msg[n-2]) {
			pad--
		}
	}
	return fmt.Sprintf("%*s", width-pad, msg) + strings.Repeat(" ", pad)
}

func isLetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// fmtMetric formats a rate as wrk's format_metric: two decimals with a
// metric suffix (k, M, G; powers of 1000).
func fmtMetric(v float64) string {
	units := []string{"", "k", "M", "G"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

// FormatMicros formats us microseconds as the text report does, in wrk's
// units (us, ms or s, two decimals: "2.00s", never "1.996799s" or "µs"),
// for other outputs to match it.
func FormatMicros(us float64) string { return fmtUs(us) }

// fmtUs formats microseconds as wrk does: us, ms or s with two decimals.
func fmtUs(v float64) string {
	switch {
	case v < 1000:
		return fmt.Sprintf("%.2fus", v)
	case v < 1e6:
		return fmt.Sprintf("%.2fms", v/1e3)
	default:
		return fmt.Sprintf("%.2fs", v/1e6)
	}
}

func fmtSignedUs(v float64) string {
	if v < 0 {
		return "-" + fmtUs(-v)
	}
	return "+" + fmtUs(v)
}

// fmtBytes formats a byte count with binary prefixes, as wrk does.
func fmtBytes(v float64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

func fmtSeconds(s float64) string { return fmt.Sprintf("%.2fs", s) }

// fmtWindow formats a window of s seconds as wrk does its -d: "10s",
// "1m", "1m30s"; fractions of a second are rounded to 10 ms ("1.78s").
func fmtWindow(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond)
	if d >= time.Minute {
		d = d.Round(time.Second)
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// plural formats n and word, adding an s unless n is 1.
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// targetText describes the open-loop target (mean, in unit) after "open
// loop": " at R requests/sec target", or with stages their targets in
// order and the window's mean.
func (r *Report) targetText(mean float64, unit string) string {
	if len(r.Stages) == 0 {
		return fmt.Sprintf(" at %.0f %s target%s", mean, unit, r.lossTarget())
	}
	steps := []string{strconv.FormatInt(r.Stages[0].TargetFrom, 10)}
	for _, st := range r.Stages {
		steps = append(steps, strconv.FormatInt(st.TargetTo, 10))
	}
	return fmt.Sprintf(", %s, %s %s target (mean %.0f)", plural(int64(len(r.Stages)), "stage"), strings.Join(steps, "→"), unit, mean)
}

// lossTarget says, for a run without stages that lost agents, what the
// target was before them: " (the plan's 1000; agent a2's share of 360
// stopped with it at 3.10s)", "" otherwise. The target the report gives is what the
// live agents were asked for, interval by interval (merge.Point
// TargetRPS), averaged over the window.
func (r *Report) lossTarget() string {
	if len(r.LostAgents) == 0 || len(r.Stages) > 0 {
		return ""
	}
	// Without stages the plan's target is constant: the highest an
	// interval had is the one before the loss.
	var planned float64
	for _, tp := range r.Timeline {
		planned = max(planned, tp.TargetRPS)
	}
	var lost []string
	for _, l := range r.LostAgents {
		if l.Rate > 0 {
			lost = append(lost, fmt.Sprintf("agent %s's share of %d stopped with it at %s", l.Name, l.Rate, fmtSeconds(l.LostAtS)))
		}
	}
	if planned == 0 || len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf(" (the plan's %.0f; %s)", planned, strings.Join(lost, "; "))
}

// sum returns the total of an error (or status) map: the report's one
// error total, over the kinds measure.Counts.ErrorMap gave it.
func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// fmtCounts formats "value (n), value (n)" in key order.
func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d)", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func fmtMap(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, m[k])
	}
	return out
}

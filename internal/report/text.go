package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
)

// TextOptions selects optional text sections.
type TextOptions struct {
	// Latency prints the percentile distribution (wrk's --latency).
	Latency bool
}

// WriteText writes r in wrk's layout, extended with the cluster's lines.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	p := &printer{w: w}
	r.writeWarnings(p)
	switch {
	case r.PlanRequests > 0:
		p.f("Running %d-request test @ %s\n", r.PlanRequests, r.Target)
	case (r.StoppedEarly || r.Partial) && r.PlanDurationS > 0:
		p.f("Running %s test @ %s\n", fmtWindow(r.PlanDurationS), r.Target) // as planned; the next lines say what ran
	default:
		p.f("Running %s test @ %s\n", fmtWindow(r.DurationS), r.Target)
	}
	p.f("  %s and %s\n", plural(int64(r.AgentCount), "agent"), plural(r.Connections, "connection"))
	if r.StoppedEarly {
		of := ""
		if r.PlanDurationS > 0 {
			of = " of " + fmtWindow(r.PlanDurationS)
		}
		p.f("  Stopped early by the user after %s%s\n", fmtSeconds(r.DurationS), of)
	}
	r.writeLosses(p)
	if r.Mode == "open" {
		p.f("  open loop%s; latency from each request's intended send time\n", r.targetText())
	}
	if r.MaxStreams > 0 {
		p.f("  HTTP/2, %d concurrent streams per connection\n", r.MaxStreams)
	}
	if r.Latency == nil {
		p.f("  Latency: no samples (no request completed in the window)\n")
	} else {
		p.f("  %-10s %9s %9s %9s\n", "", "Avg", "Stdev", "Max")
		p.f("    %-8s %9s %9s %9s\n", "Latency", fmtUs(r.Latency.Mean), fmtUs(r.Latency.Stdev), fmtUs(float64(r.Latency.Max)))
		if o.Latency {
			from := "request start"
			if r.Mode == "open" {
				from = "intended send time"
			}
			p.f("  Latency Distribution (completed responses, %s to last byte)\n", from)
			for _, q := range []struct {
				label string
				v     int64
			}{{"50%", r.Latency.P50}, {"75%", r.Latency.P75}, {"90%", r.Latency.P90}, {"99%", r.Latency.P99}, {"99.9%", r.Latency.P999}, {"99.99%", r.Latency.P9999}} {
				p.f("  %7s %9s\n", q.label, fmtUs(float64(q.v)))
			}
		}
	}
	phases := []struct {
		name string
		s    *hist.Summary
	}{{"Service", r.ServiceTimeUs}, {"Lateness", r.SendLatenessUs}, {"Connect", r.ConnectUs}, {"TLS full", r.TLSHandshakeFullUs}, {"TLS resumed", r.TLSHandshakeResumedUs}, {"TTFB", r.TTFBUs}}
	header := false
	for _, ph := range phases {
		if ph.s == nil {
			continue
		}
		if !header {
			p.f("  %-13s %9s %9s %9s %9s %8s\n", "Phases", "Avg", "p50", "p99", "Max", "Count")
			header = true
		}
		p.f("    %-11s %9s %9s %9s %9s %8d\n", ph.name, fmtUs(ph.s.Mean), fmtUs(float64(ph.s.P50)), fmtUs(float64(ph.s.P99)), fmtUs(float64(ph.s.Max)), ph.s.Count)
	}
	p.f("  %d requests in %s, %s read\n", r.Requests, fmtSeconds(r.DurationS), fmtBytes(float64(r.BytesRead)))
	p.f("  %s opened, %s", plural(r.ConnectionsOpened, "connection"), plural(r.Reconnects, "reconnect"))
	if r.Handshakes.Full+r.Handshakes.Resumed > 0 {
		p.f("; TLS handshakes: %d full, %d resumed", r.Handshakes.Full, r.Handshakes.Resumed)
	}
	if r.Retries > 0 {
		p.f("; %d retries", r.Retries)
	}
	p.f("\n")
	if len(r.TLS.Version) > 0 {
		p.f("  TLS (connections): %s; %s; %s", fmtCounts(r.TLS.Version), fmtCounts(r.TLS.Cipher), fmtCounts(r.TLS.Group))
		if len(r.TLS.ALPN) > 0 {
			p.f("; ALPN %s", fmtCounts(r.TLS.ALPN))
		}
		p.f("\n")
	}
	if r.InFlight > 0 {
		p.f("  %d requests in flight when the window closed (not counted above)\n", r.InFlight)
	}
	if r.Non2xx3xx > 0 {
		p.f("  Non-2xx or 3xx responses: %d\n", r.Non2xx3xx)
		p.f("  Status codes: %s\n", fmtMap(r.Status))
	}
	if n := r.ErrorTotal(); n > 0 {
		p.f("  Errors: %d (%s)\n", n, fmtMap(r.Errors))
	}
	if r.Mode == "open" {
		label := "Target"
		if len(r.Stages) > 0 {
			label = "Mean target"
		}
		never := ""
		if r.Unsent > 0 {
			never = fmt.Sprintf(", %d of them never sent", r.Unsent)
		}
		p.f("  %s %.2f requests/sec, achieved %.2f; %d sends started late (missed)%s\n", label, r.TargetRPS, r.RPS, r.Missed, never)
	}
	if len(r.Stages) > 0 {
		p.f("  %-6s %8s %8s %16s %10s %9s %9s %7s\n", "Stage", "Start", "Length", "Target", "REQ/S", "p50", "p99", "Errors")
		for _, st := range r.Stages {
			p50, p99 := "-", "-"
			if st.Latency != nil {
				p50, p99 = fmtUs(float64(st.Latency.P50)), fmtUs(float64(st.Latency.P99))
			}
			p.f("  %-6d %7.1fs %7.1fs %7d → %-6d %10.2f %9s %9s %7d\n", st.Index, st.StartS, st.DurationS, st.TargetFrom, st.TargetTo, st.RPS, p50, p99, sum(st.Errors))
		}
	}
	p.f("Requests/sec: %10.2f\n", r.RPS)
	p.f("Transfer/sec: %10s\n", fmtBytes(r.TransferBps))
	if r.CoordinatorLost == "" {
		p.f("Start skew:   %10s across agents\n", fmtUs(r.StartSkewUs))
	}
	if w := r.Warmup; w != nil {
		p.f("Warm-up:      %s, %d requests, %d errors (excluded above)\n", fmtSeconds(w.DurationS), w.Requests, sum(w.Errors))
	}
	if r.ClientBound {
		p.f("WARNING: client-bound: %s; these numbers may measure the load generators, not the server\n", strings.Join(r.ClientBoundReasons, "; "))
	}
	if r.CoordinatorLost != "" {
		p.f("Agents: not known (the coordinator was lost)\nRun ID: %s\n", r.RunID)
		return p.err
	}
	p.f("Agents:\n")
	p.f("  %-20s %6s %10s %10s %7s %8s %10s %10s %s\n", "NAME", "CONNS", "REQUESTS", "REQ/S", "CPU", "ERRORS", "START", "OFFSET", "PINNED")
	for _, a := range r.AgentRows {
		pinned := a.CPUList
		if pinned == "" {
			pinned = "-"
		}
		p.f("  %-20s %6d %10d %10.2f %6.1f%% %8d %10s %10s %s\n", a.Name, a.Connections, a.Requests, a.RPS, 100*a.CPUUtil, a.Errors, fmtSignedUs(a.StartOffsetUs), fmtSignedUs(a.ClockOffsetUs), pinned)
		if a.Error != "" {
			p.f("    ! %s (its measurements until then are included)\n", a.Error)
		}
	}
	r.writeProvenance(p)
	p.f("Run ID: %s\n", r.RunID)
	return p.err
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

// targetText describes the open-loop target after "open loop": " at R
// requests/sec target", or with stages their targets in order and the
// window's mean.
func (r *Report) targetText() string {
	if len(r.Stages) == 0 {
		return fmt.Sprintf(" at %.0f requests/sec target", r.TargetRPS)
	}
	steps := []string{strconv.FormatInt(r.Stages[0].TargetFrom, 10)}
	for _, st := range r.Stages {
		steps = append(steps, strconv.FormatInt(st.TargetTo, 10))
	}
	return fmt.Sprintf(", %s, %s requests/sec target (mean %.0f)", plural(int64(len(r.Stages)), "stage"), strings.Join(steps, "→"), r.TargetRPS)
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

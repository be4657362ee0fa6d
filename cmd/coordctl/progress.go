package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Terminal control sequences of the live status line (ECMA-48, as k6 and
// oha write them): a carriage return back to the line's start, then
// Erase in Line (CSI K) from the cursor to the line's end.
const (
	lineStart = "\r"
	eraseLine = "\x1b[K"
)

// progressView shows a run's progress on stderr, as k6 and oha do. On a
// terminal (golang.org/x/term's IsTerminal) it keeps one status line,
// rewritten in place after each merged interval: elapsed / planned, the
// interval's RPS and p99, the errors so far, the agents running and a
// client-bound warning. Elsewhere (a pipe, a file, a CI log) it prints one
// plain line per interval (progressLine). Quiet, it prints neither.
//
// Everything else coordctl writes to stderr during a run (a lost agent,
// the stop notice) goes through Write, which erases the status line
// first and redraws it after a whole line, so that no two mix on one line;
// done erases it for good before the report. It is safe for concurrent
// use (the stopper writes from its own goroutine).
type progressView struct {
	mu    sync.Mutex
	w     io.Writer
	fd    int // the terminal's file descriptor, or -1 when w is not a terminal
	quiet bool

	planned         time.Duration // the plan's window; 0 in count mode without one
	plannedRequests int64         // count mode's requests; 0 in duration mode
	open            bool          // open loop: missed sends and lateness count

	agents   int   // the run's agents (RunAccepted); 0 until known
	errors   int64 // errors in the intervals so far
	ended    int64 // requests completed in the intervals so far
	status   string
	finished bool
}

// newProgressView returns the progress view of a run of plan p on w
// (coordctl's stderr): a live line when w is a terminal (an *os.File, or
// anything with Fd, on a tty), plain lines otherwise, nothing when quiet.
func newProgressView(w io.Writer, p plan.Plan, quiet bool) *progressView {
	v := &progressView{w: w, fd: -1, quiet: quiet, planned: p.Duration, plannedRequests: p.Requests, open: p.Load == plan.OpenLoop}
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		v.fd = int(f.Fd())
	}
	return v
}

// live reports whether v draws the status line in place.
func (v *progressView) live() bool { return v.fd >= 0 && !v.quiet }

// Write writes b to stderr, erasing the status line before and redrawing
// it after b when b ends a line.
func (v *progressView) Write(b []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.eraseLocked()
	n, err := v.w.Write(b)
	if len(b) > 0 && b[len(b)-1] == '\n' {
		v.drawLocked()
	}
	return n, err
}

// accepted notes the run's agent count.
func (v *progressView) accepted(a *pb.RunAccepted) {
	v.mu.Lock()
	v.agents = int(a.GetAgents())
	v.mu.Unlock()
}

// interval shows merged interval pr.
func (v *progressView) interval(pr *pb.Progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errors += pr.GetErrors()
	v.ended += pr.GetRequests()
	if v.finished || v.quiet {
		return
	}
	if !v.live() {
		fmt.Fprintln(v.w, progressLine(pr))
		return
	}
	v.eraseLocked()
	v.status = v.statusLine(pr)
	v.drawLocked()
}

// done erases the status line for good: the report (on stdout, often the
// same terminal) or an error follows. Later intervals are not shown.
func (v *progressView) done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.eraseLocked()
	v.status, v.finished = "", true
}

// eraseLocked erases the status line, when one is on the screen.
func (v *progressView) eraseLocked() {
	if v.live() && v.status != "" {
		_, _ = io.WriteString(v.w, lineStart+eraseLine)
	}
}

// drawLocked writes the status line, cut to the terminal's width so that
// it never wraps (a wrapped line could not be rewritten in place).
func (v *progressView) drawLocked() {
	if !v.live() || v.status == "" || v.finished {
		return
	}
	line := v.status
	if width, _, err := term.GetSize(v.fd); err == nil && width > 1 {
		line = cut(line, width-1)
	}
	_, _ = io.WriteString(v.w, lineStart+line+eraseLine)
}

// cut returns s cut to at most n runes.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// barWidth is the width of the status line's progress bar, in cells.
const barWidth = 20

// statusLine returns the live status line after merged interval pr:
//
//	12s/30s [========            ]  21298 req/s  p99 4.12ms  3 errors  2/2 agents  CLIENT-BOUND: CPU 95%
//
// Elapsed is the end of the interval, from the window's start; in count
// mode the bar follows the requests completed against the plan's count.
// RPS and p99 are the interval's, errors the run's so far. The warning
// follows report's client-bound rule (docs/design.md, invariant 6) applied
// to the interval: an agent over report.ClientBusyLimit busy, or in open
// loop more than report.ClientMissedLimit of the interval's sends missed
// by the agents' own scheduling (missed − backlogged) or left more than
// report.LatenessLimit late by their own delay (client_late; a wait for a
// busy connection never counts). (The run-queue delay is judged on the
// window only.)
func (v *progressView) statusLine(pr *pb.Progress) string {
	pt := pr.GetPoint()
	elapsed := pt.GetStart().AsDuration() + pt.GetLength().AsDuration()
	if pt == nil {
		elapsed = time.Duration(pr.GetIndex()+1) * pr.GetInterval().AsDuration()
	}
	var b strings.Builder
	switch {
	case v.plannedRequests > 0:
		fmt.Fprintf(&b, "%s %d/%d requests %s", round(elapsed), v.ended, v.plannedRequests, bar(float64(v.ended)/float64(v.plannedRequests)))
	case v.planned > 0:
		fmt.Fprintf(&b, "%s/%s %s", round(elapsed), round(v.planned), bar(float64(elapsed)/float64(v.planned)))
	default:
		b.WriteString(round(elapsed))
	}
	secs := pr.GetInterval().AsDuration().Seconds()
	fmt.Fprintf(&b, "  %.0f req/s", float64(pr.GetRequests())/max(secs, 1e-9))
	if pr.GetP99Us() > 0 {
		fmt.Fprintf(&b, "  p99 %s", report.FormatMicros(float64(pr.GetP99Us())))
	}
	fmt.Fprintf(&b, "  %s", report.Plural(v.errors, "error"))
	if pt != nil {
		total := max(v.agents, int(pt.GetAgents()))
		fmt.Fprintf(&b, "  %d/%d agents", pt.GetAgents(), total)
	}
	if why := v.clientBound(pr); why != "" {
		b.WriteString("  CLIENT-BOUND: " + why)
	}
	return b.String()
}

// clientBound says why interval pr looks client-bound, "" when it does not.
func (v *progressView) clientBound(pr *pb.Progress) string {
	pt := pr.GetPoint()
	var why []string
	busiest := 0.0
	for _, b := range pt.GetCpuBusy() {
		busiest = max(busiest, b)
	}
	if busiest > report.ClientBusyLimit {
		why = append(why, fmt.Sprintf("CPU %.0f%%", 100*busiest))
	}
	if v.open {
		c := pr.GetCounters()
		scheduled := pr.GetRequests() + pr.GetErrors() + c.GetUnsent() - c.GetCarried()
		// Sends late for a free connection (backlogged) are the server's.
		late := pt.GetMissed() - c.GetBacklogged()
		if scheduled > 0 && float64(late) > report.ClientMissedLimit*float64(scheduled) {
			why = append(why, fmt.Sprintf("%.1f%% missed", 100*float64(late)/float64(scheduled)))
		} else if scheduled > 0 && float64(c.GetClientLate()) > report.ClientMissedLimit*float64(scheduled) {
			why = append(why, fmt.Sprintf("%.1f%% sent over %s late", 100*float64(c.GetClientLate())/float64(scheduled), report.FormatMicros(float64(report.LatenessLimit.Microseconds()))))
		}
	}
	return strings.Join(why, ", ")
}

// bar draws fraction f (0 to 1) of a progress bar.
func bar(f float64) string {
	n := int(min(max(f, 0), 1) * barWidth)
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", barWidth-n) + "]"
}

// round shows d in whole seconds, or tenths below 10 s.
func round(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// progressLine is the plain progress line of merged interval pr, one per
// interval where stderr is no terminal: its index, RPS, p99 and errors.
func progressLine(pr *pb.Progress) string {
	secs := pr.GetInterval().AsDuration().Seconds()
	line := fmt.Sprintf("  [%3d] %10.0f req/s", pr.GetIndex()+1, float64(pr.GetRequests())/max(secs, 1e-9))
	if pt := pr.GetPoint(); pt.GetPartial() {
		line += fmt.Sprintf("  (partial: %s)", report.Plural(int64(pt.GetAgents()), "agent"))
	}
	if pr.GetP99Us() > 0 {
		line += fmt.Sprintf("  p99 %s", report.FormatMicros(float64(pr.GetP99Us())))
	}
	if pr.GetErrors() > 0 {
		line += "  " + report.Plural(pr.GetErrors(), "error")
	}
	return line
}

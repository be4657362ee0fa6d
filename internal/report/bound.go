package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/phalanxload/phalanx/internal/measure"
)

// Client-bound thresholds (docs/design.md, invariant 6): ClientBusyLimit
// is the busy fraction of an agent's usable CPUs above which it is
// client-bound; ClientWaitLimit the run-queue delay its threads may
// accumulate (runnable but waiting for a CPU, from
// /proc/self/task/*/schedstat, summed over threads) in seconds per second
// of the window per usable CPU: two agents sharing one CPU each wait
// about 0.5 s per second while neither is 90 % busy; the sum can exceed 1
// when more threads are runnable than there are CPUs; ClientMissedLimit the
// fraction of open-loop sends scheduled that may be late by the agents'
// own scheduling (and, for ServerBound, late for a free connection).
const (
	ClientBusyLimit   = 0.90
	ClientWaitLimit   = 0.25
	ClientMissedLimit = 0.01
)

// LatenessLimit is how late an open-loop send may leave by the agent's
// own delay (after both its intended time and its connection's freeing)
// before it counts as client-late (measure.ClientLateLimit, which the
// engine applies; this is the same value): beyond it the tool's own delay
// is a visible part of the latency a user checks against a
// millisecond-scale objective. More than ClientMissedLimit of the sends
// client-late flag the run client-bound. A wait for a busy connection
// never counts: that lateness is the server's (or too few connections'),
// and is in the latency by design.
const LatenessLimit = measure.ClientLateLimit

// scheduled returns the open-loop sends the schedule had due in the
// window: those issued and those never sent (Missed counts both), less
// the warm-up's sends carried into the window (Carried). A
// connection rate's schedule is of connections (each ticket's start, late
// or not, is one send: its first request, or its handshake alone with
// --requests-per-connection 0): those opened, those that failed to open
// (every error with no request per connection; else the connect, tls,
// ports and local errors) and those never started. With requests per
// connection, a ticket's first request is issued when its connection
// starts, so a start that never opened (a handshake the server held until
// a timeout or the window's end) is still counted: the starts are at
// least Issued less the follow-up requests, which are at most K − 1 per
// opened connection.
func (r *Report) scheduled() int64 {
	cr := r.ConnectionRate
	if cr == nil {
		return r.Issued + r.Unsent - r.Carried
	}
	if cr.RequestsPerConnection == 0 {
		return cr.Connections + r.ErrorTotal() + r.Unsent - r.Carried
	}
	failed := r.Errors["connect"] + r.Errors["tls"] + r.Errors["ports"] + r.Errors["local"]
	starts := max(cr.Connections+failed, r.Issued-int64(cr.RequestsPerConnection-1)*cr.Connections)
	return starts + r.Unsent - r.Carried
}

// flagBound names what limited the run: the client (ClientBound, each
// reason naming its agent, or for late sends the agents with client-late
// ones: clientLateAgents) or, failing that, the
// server (ServerBound: a backlog at the connection cap while the agents
// were not the limit). Neither is set for a run limited by neither.
func (r *Report) flagBound() {
	for _, a := range r.AgentRows {
		if a.CPUUtil > ClientBusyLimit {
			r.ClientBoundReasons = append(r.ClientBoundReasons, fmt.Sprintf("agent %s's CPUs were %.0f %% busy", a.Name, 100*a.CPUUtil))
		}
		if a.CPUWait > ClientWaitLimit {
			// CPUWait is seconds of waiting per second per usable CPU: a sum
			// over threads, it exceeds 1 when more threads were runnable
			// than there were CPUs, so it is no fraction of the time.
			r.ClientBoundReasons = append(r.ClientBoundReasons, fmt.Sprintf("agent %s's threads waited for a CPU %.2fs per second per CPU (run-queue delay %.2fs summed over its threads, %s; its CPUs %.0f %% busy)",
				a.Name, a.CPUWait, a.CPUWaitS, plural(int64(a.CPUs), "CPU"), 100*a.CPUUtil))
		}
	}
	scheduled, sends := r.scheduled(), "sends"
	if r.ConnectionRate != nil {
		sends = "connection starts"
	}
	backlog := r.Mode == "open" && scheduled > 0 && float64(r.Backlogged) > ClientMissedLimit*float64(scheduled)
	if r.Mode == "open" && scheduled > 0 {
		// Sends late by the agents' own delay, not for a busy connection:
		// over 5 ms (missed, unsent included), else over 1 ms (client-late).
		var reason string
		missLimit := fmtUs(float64(measure.MissThreshold.Microseconds()))
		clientLate := fmt.Sprintf("left over %s late by the agents' own delay", fmtUs(float64(LatenessLimit.Microseconds())))
		if who := r.clientLateAgents(); who != "" {
			clientLate += " (" + who + ")"
		}
		if late := r.Missed - r.Backlogged; float64(late) > ClientMissedLimit*float64(scheduled) {
			reason = fmt.Sprintf("%d of %d scheduled %s (%.1f %%) started over %s late", late, scheduled, sends, 100*float64(late)/float64(scheduled), missLimit)
			if r.Unsent > r.Backlogged {
				reason = fmt.Sprintf("%d of %d scheduled %s (%.1f %%) started over %s late or never (%d late, %d never sent)",
					late, scheduled, sends, 100*float64(late)/float64(scheduled), missLimit, late-r.Unsent, r.Unsent)
			}
			if r.Backlogged > 0 {
				reason += fmt.Sprintf(" by the agents' own scheduling (%d missed, %d of them for a busy connection)", r.Missed, r.Backlogged)
			}
			if r.ClientLate > 0 {
				reason += fmt.Sprintf("; %d %s", r.ClientLate, clientLate)
			}
		} else if float64(r.ClientLate) > ClientMissedLimit*float64(scheduled) {
			reason = fmt.Sprintf("%d of %d scheduled %s (%.1f %%) %s", r.ClientLate, scheduled, sends,
				100*float64(r.ClientLate)/float64(scheduled), clientLate)
		}
		if reason != "" {
			r.ClientBoundReasons = append(r.ClientBoundReasons, reason)
		}
	}
	r.ClientBound = len(r.ClientBoundReasons) > 0
	if backlog && !r.ClientBound {
		if k := r.stallInterval(scheduled); k >= 0 {
			pt := r.Timeline[k]
			r.Stall = fmt.Sprintf("%d of %d scheduled %s (%.1f %%) waited over %v for a busy connection, %d of them ending in the interval at %s-%s: a stall of the server or of the agents (from the client the two look alike), not a sustained limit; the latency includes it",
				r.Backlogged, scheduled, sends, 100*float64(r.Backlogged)/float64(scheduled), measure.MissThreshold, pt.Backlogged,
				fmtSeconds(pt.StartS), fmtSeconds(pt.StartS+pt.DurationS))
			return
		}
		busy := 0.0
		for _, a := range r.AgentRows {
			busy = max(busy, a.CPUUtil)
		}
		r.ServerBoundReasons = append(r.ServerBoundReasons, fmt.Sprintf("%d of %d scheduled %s (%.1f %%) found every connection busy (%d unsent), with the agents' CPUs at most %.0f %% busy",
			r.Backlogged, scheduled, sends, 100*float64(r.Backlogged)/float64(scheduled), r.Unsent, 100*busy))
		r.ServerBound = true
	}
}

// clientLateAgents names the agents with client-late sends (Agent.ClientLate),
// the most first, at most three and how many more: "agent a's 80, agent
// b's 4, 2 more agents"; "" when no agent row counts any (agents of a
// build before the count).
func (r *Report) clientLateAgents() string {
	rows := slices.Clone(r.AgentRows)
	rows = slices.DeleteFunc(rows, func(a Agent) bool { return a.ClientLate == 0 })
	slices.SortStableFunc(rows, func(a, b Agent) int { return cmp.Compare(b.ClientLate, a.ClientLate) })
	var names []string
	for i, a := range rows {
		if i == 3 {
			names = append(names, pluralOf(int64(len(rows)-3), "more agent", "more agents"))
			break
		}
		names = append(names, fmt.Sprintf("agent %s's %d", a.Name, a.ClientLate))
	}
	if len(names) == 0 {
		return ""
	}
	return strings.Join(names, ", ")
}

// stallInterval returns the index in Timeline of the interval that held a
// stall's backlog, or -1 when the backlog was no stall: nothing unsent,
// at least two intervals with per-interval backlogs known, and outside
// one interval that is not the last the backlogged sends under
// ClientMissedLimit of the scheduled ones. A backlog in the last interval
// may still have been growing when the window closed; one in every
// interval is a limit.
func (r *Report) stallInterval(scheduled int64) int {
	if r.Unsent > 0 || len(r.Timeline) < 2 {
		return -1
	}
	var total int64
	k := -1
	for i, pt := range r.Timeline {
		total += pt.Backlogged
		if k < 0 || pt.Backlogged > r.Timeline[k].Backlogged {
			k = i
		}
	}
	if total == 0 || k == len(r.Timeline)-1 || float64(total-r.Timeline[k].Backlogged) > ClientMissedLimit*float64(scheduled) {
		return -1 // per-interval backlogs unknown (an older agent), in the last interval, or spread
	}
	return k
}

package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// event is one message (or the end) of one agent's Run stream.
type event struct {
	agent int
	msg   *pb.RunResponse
	err   error
	// release ends the validity of msg's aliased histogram bytes
	// (aliasedResponse); the loop calls it once the event is handled.
	release func()
}

// pump starts one receive pump per agent: each forwards its stream's
// messages, and then its end, to the returned channel. The pumps end when
// their stream ends or the run's context does (run.close joins them).
func (rn *run) pump() <-chan event {
	events := make(chan event, 16*len(rn.agents))
	for i, r := range rn.agents {
		rn.spawn(func() {
			for {
				ar := new(aliasedResponse)
				err := r.stream.RecvMsg(ar)
				select {
				case events <- event{agent: i, msg: ar.Msg, err: err, release: ar.Release}:
				case <-rn.ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		})
	}
	return events
}

// Loss detection bounds (docs/design.md, "Losing an agent"). An agent
// whose next interval is more than SilenceIntervals intervals plus
// SilenceGrace overdue is lost ("silent"); its interval k is due at the
// window's start plus (k+1) intervals, and the last one, which the agent
// sends once its requests in flight have drained, at the window's planned
// end plus the plan's timeout. A coordinator whose own run loop was held up
// for more than StallThreshold (frozen by SIGSTOP, starved of CPU) extends
// every agent's bound by that long: its own stall is not their silence.
const (
	SilenceIntervals = 2
	SilenceGrace     = 2 * time.Second
	StallThreshold   = time.Second
	// watchTick is how often the run loop checks for silent agents.
	watchTick = 100 * time.Millisecond
	// stallBlame is how long after a stall of the coordinator an agent's
	// stream end is blamed on that stall in the agent's error.
	stallBlame = 10 * time.Second
	// agentSilenceLimit is the shortest coordinator silence an agent
	// drops its stream for (its keepalive pings after 1 s without a read
	// and waits 2 s for the answer: agent.New): a shorter stall is never
	// blamed for a stream's end.
	agentSilenceLimit = 2 * time.Second
)

// loop merges every agent's intervals until each has sent Done and closed
// its stream, been lost, or missed the run's deadline (its start plus
// warm-up, window, timeout and 10 s); it forwards StopRun to the agents,
// gives up an agent whose stream ends early or that is silent past the
// bound above (and then applies the plan's OnAgentLoss), and calls
// hooks.Progress after each interval merged across the agents not lost.
// An agent's loss is kept in its row, not returned. Errors: the caller's
// context ending.
func (rn *run) loop(hooks RunHooks) error {
	p := rn.p
	events := rn.pump()
	limit := p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	deadline := time.NewTimer(time.Until(rn.startAt.Add(p.Warmup + limit + p.Timeout + 10*time.Second)))
	defer deadline.Stop()
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	lastTick := time.Now()

	pending := len(rn.agents)
	stop := rn.active.stop // nil once handled
	for pending > 0 {
		var ev event
		var ticked bool
		select {
		case <-stop:
			stop = nil
			rn.userStop = true
			rn.log.Info("stopping the run early: ending every agent's window")
			rn.stopAgents()
			continue
		case ev = <-events:
		case <-tick.C:
			ticked = true
		case <-deadline.C:
			for _, r := range rn.agents {
				if r.done == nil && r.err == nil {
					r.err = fmt.Errorf("agent %s: no result before the run's deadline", r.meta.GetName())
					r.lost, r.lostAt = true, time.Since(rn.windowStart())
					pending--
				} else if r.done != nil && !r.ended {
					r.ended = true // got its result; its stream just did not close
					pending--
				}
			}
			rn.cancel()
			continue
		case <-rn.ctx.Done():
			return toStatus(rn.ctx.Err())
		}
		// A loop held up for long (the process frozen or starved) is the
		// coordinator's stall, whatever woke it: the agents were not
		// silent meanwhile, it was not listening.
		now := time.Now()
		if gap := now.Sub(lastTick); gap > StallThreshold+watchTick {
			rn.noteStall(gap-watchTick, now)
		}
		if ticked {
			lastTick = now
			pending -= rn.watchSilence(now, hooks)
			continue
		}
		done := rn.handle(ev, hooks)
		ev.release()
		if done {
			pending--
		}
	}
	return nil
}

// noteStall records a stall of the coordinator of length d, ended at now.
func (rn *run) noteStall(d time.Duration, now time.Time) {
	rn.stalled += d
	rn.stall = max(rn.stall, d)
	rn.lastStall, rn.stallEnd = d, now
	rn.log.Warn("the coordinator was stalled; its agents stop their load after 2s without it", "stalled", d.Round(time.Millisecond))
}

// silenceLimit is how far past its due time an agent's next interval may
// be before the agent is lost.
func (rn *run) silenceLimit() time.Duration {
	return SilenceIntervals*rn.p.Interval + SilenceGrace
}

// due returns when agent r's next message is due: its next interval's
// end, or for the last interval the window's planned end plus the plan's
// timeout (the drain), shifted by the coordinator's own stalls.
func (rn *run) due(r *agentRun) time.Time {
	p := &rn.p // not a copy: the silence watch calls this per agent, every watchTick
	end := time.Duration(r.next+1) * p.Interval
	if p.Duration > 0 && end >= p.Duration {
		end = p.Duration + p.Timeout
	}
	return rn.windowStart().Add(end + rn.stalled)
}

// watchSilence gives up every running agent whose next message is overdue
// by more than silenceLimit; it returns how many it gave up. An agent's due
// time only moves later (its next interval, the coordinator's stalls), so
// no agent can be overdue before the earliest due time of the last scan
// plus the limit: until then the watch does not look (a scan of 1,000
// agents at every watchTick was 7 % of the coordinator's CPU in
// BenchmarkCoordinatorAgents).
func (rn *run) watchSilence(now time.Time, hooks RunHooks) int {
	if now.Before(rn.silentAfter) {
		return 0
	}
	n := 0
	limit := rn.silenceLimit()
	var earliest time.Time
	for i, r := range rn.agents {
		if r.done != nil || r.ended || r.err != nil {
			continue // finished, or its stream's end is awaited with the deadline
		}
		due := rn.due(r)
		if earliest.IsZero() || due.Before(earliest) {
			earliest = due
		}
		if late := now.Sub(due); late > limit {
			silent := now.Sub(r.lastMsg.Add(rn.stalled)).Round(100 * time.Millisecond)
			err := fmt.Errorf("agent %s: silent for %v (interval %d overdue by %v; the limit is %d intervals + %v)",
				r.meta.GetName(), silent, r.next, late.Round(100*time.Millisecond), SilenceIntervals, SilenceGrace)
			rn.lose(i, err, hooks)
			n++
		}
	}
	// A lost agent's due time counted: the next scan comes no later.
	rn.silentAfter = earliest.Add(limit)
	return n
}

// lose gives agent i up after the start: it keeps what the agent sent,
// ends its stream (so that it stops any load at once, should it wake up),
// lets the timeline go on without it, reports the loss, and applies the
// plan's OnAgentLoss: abort ends every other agent's window now.
func (rn *run) lose(i int, err error, hooks RunHooks) {
	r := rn.agents[i]
	now := time.Now()
	r.err, r.lost, r.lostAt = err, true, now.Sub(rn.windowStart())
	rn.metrics.Lost()
	if r.cancelStream != nil {
		r.cancelStream()
	}
	// A stream that ended after the coordinator's own stall is not the
	// agent's failure: every agent's goes the same way, and there is
	// nothing to abort.
	aborting := false
	if rn.p.OnAgentLoss == plan.AbortOnLoss && !rn.blameStall() {
		for _, o := range rn.agents {
			aborting = aborting || o.done == nil && o.err == nil
		}
	}
	rn.log.Warn("agent lost mid-run; keeping its measurements so far", "agent", r.meta.GetName(), "err", err,
		"on_agent_loss", rn.p.OnAgentLoss.String(), "stopping_others", aborting)
	if hooks.Lost != nil {
		hooks.Lost(&pb.AgentLost{Agent: r.meta.GetName(), Error: err.Error(), At: durationpb.New(r.lostAt), Aborting: aborting})
	}
	pts, merr := rn.m.Lose(i)
	for _, pt := range pts {
		rn.progress(pt, hooks)
	}
	if merr != nil {
		rn.log.Error("merge after a loss", "err", merr)
	}
	if aborting && !rn.aborted {
		rn.aborted = true
		rn.stopAgents()
	}
}

// stopAgents ends every running agent's window now (StopRun, or an
// abort). Each still sends its last intervals and Done; one whose stream
// is broken fails through its Recv as usual.
func (rn *run) stopAgents() {
	for _, r := range rn.agents {
		if r.done != nil || r.ended || r.err != nil {
			continue
		}
		if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Stop{Stop: &pb.Stop{}}}); err != nil {
			rn.log.Warn("send stop", "agent", r.meta.GetName(), "err", err)
		}
	}
}

// progress adds merged point pt to the run's metrics, calls the Progress
// hook with it, stores it, and checks the thresholds for an abort.
func (rn *run) progress(pt *merge.Point, hooks RunHooks) {
	defer rn.checkAbort(pt)
	if err := rn.metrics.Interval(metrics.Interval{Length: pt.Length, Counts: pt.Counts, Latency: pt.Latency,
		TargetRPS: pt.TargetRPS, CPUBusy: pt.CPUBusy, Agents: pt.Agents}); err != nil {
		rn.log.Warn("metrics", "interval", pt.Index, "err", err)
	}
	if hooks.Progress == nil && rn.rec == nil {
		return
	}
	pr := &pb.Progress{RunId: rn.id, Index: int32(pt.Index), Requests: pt.Requests, Errors: pt.Errors, P99Us: pt.P99,
		Interval: durationpb.New(pt.Length), Point: wire.PointToProto(pt)}
	if pt.Counts != nil {
		pr.Counters = wire.CountsToProto(pt.Counts)
	}
	rn.rec.interval(pr)
	if hooks.Progress != nil {
		hooks.Progress(pr)
	}
}

// blameStall reports whether a stream's end now follows a stall of the
// coordinator closely enough to be blamed on it.
func (rn *run) blameStall() bool {
	return rn.lastStall >= agentSilenceLimit && time.Since(rn.stallEnd) < stallBlame
}

// streamError says how agent r's stream ended before its Done, naming the
// agent, and the coordinator's stall when one just preceded it.
func (rn *run) streamError(r *agentRun, err error) error {
	how := "stream ended without a result"
	if !errors.Is(err, io.EOF) {
		how = fmt.Sprintf("stream ended (%s)", status.Convert(err).Message())
	}
	if rn.blameStall() {
		return fmt.Errorf("agent %s: %s after the coordinator stalled for %v: the agent stopped its load on its own",
			r.meta.GetName(), how, rn.lastStall.Round(100*time.Millisecond))
	}
	return fmt.Errorf("agent %s: %s", r.meta.GetName(), how)
}

// handle takes one event; it reports whether its agent is now finished
// (ended after Done, or lost).
func (rn *run) handle(ev event, hooks RunHooks) bool {
	r := rn.agents[ev.agent]
	if r.ended || r.err != nil {
		return false // already ended (a late message after the deadline, or after its loss)
	}
	if ev.err != nil && r.done != nil {
		// The stream's end after Done: the agent has released its
		// connections and is free for the next run.
		r.ended = true
		return true
	}
	if ev.err != nil {
		rn.c.metrics.StreamError()
		rn.lose(ev.agent, rn.streamError(r, ev.err), hooks)
		return true
	}
	r.lastMsg = time.Now()
	switch msg := ev.msg.Msg.(type) {
	case *pb.RunResponse_Interval:
		iv := msg.Interval
		if err := checkFirstSend(rn.p, iv.GetFirstSendUnixNano(), rn.startAt.Add(r.offset+rn.p.Warmup)); err != nil {
			rn.malformed(ev.agent, "interval", fmt.Errorf("interval %d: %w", iv.GetIndex(), err), hooks)
			return true
		}
		counts := &rn.ivCounts
		pt, err := addInterval(rn.m, ev.agent, r.cpus, rn.startAt.Add(r.offset+rn.p.Warmup), iv, counts)
		if err != nil {
			rn.malformed(ev.agent, "interval", err, hooks)
			return true
		}
		if fs := iv.GetFirstSendUnixNano(); fs != 0 && (r.firstSend == 0 || fs < r.firstSend) {
			r.firstSend = fs
		}
		r.counters.Add(counts)
		if rn.keepIntervals {
			r.kept = append(r.kept, keptInterval(iv, counts, rn.startAt.Add(r.offset+rn.p.Warmup)))
		}
		r.cpu += iv.GetCpuTime().AsDuration()
		r.cpuWait += max(iv.GetCpuWait().AsDuration(), 0)
		r.intervals++
		if l := time.Duration(iv.GetEndUnixNano() - iv.GetStartUnixNano()); l > 0 {
			r.addRateSample(counts.Requests, l, rn.p.Interval)
		}
		r.next = max(r.next, int(iv.GetIndex())+1)
		r.lastEnd = max(r.lastEnd, time.Unix(0, iv.GetEndUnixNano()).Sub(rn.startAt.Add(r.offset+rn.p.Warmup)))
		if pt != nil {
			rn.progress(pt, hooks)
		}
	case *pb.RunResponse_Done:
		if err := checkDone(rn.p, msg.Done, rn.startAt.Add(r.offset+rn.p.Warmup)); err != nil {
			rn.malformed(ev.agent, "result", err, hooks)
			return true
		}
		r.done = msg.Done
	default:
		rn.malformed(ev.agent, "message", fmt.Errorf("unexpected %T during the run", ev.msg.GetMsg()), hooks)
		return true
	}
	return false
}

// malformed fails agent i's share on a message it sent that the
// coordinator refuses (what names it): the agent is lost (lose: its row
// keeps what it sent before and names the error, the plan's on_agent_loss
// applies), and its stream is closed, which ends the share on the agent
// (its load stops).
func (rn *run) malformed(i int, what string, err error, hooks RunHooks) {
	r := rn.agents[i]
	if cerr := r.stream.CloseSend(); cerr != nil {
		rn.log.Debug("close send", "agent", r.meta.GetName(), "err", cerr)
	}
	rn.lose(i, fmt.Errorf("agent %s sent a malformed %s: %w", r.meta.GetName(), what, err), hooks)
}

// keptInterval is agent interval iv (merged, with counts its counters) as
// the result keeps it: a copy of its latency histogram's bytes as the agent
// sent them, its bounds as offsets from the agent's window start
// (windowStart, its clock).
func keptInterval(iv *pb.Interval, counts *measure.Counts, windowStart time.Time) *pb.AgentInterval {
	return &pb.AgentInterval{
		Index:    iv.GetIndex(),
		Start:    durationpb.New(time.Unix(0, iv.GetStartUnixNano()).Sub(windowStart)),
		Length:   durationpb.New(time.Duration(iv.GetEndUnixNano() - iv.GetStartUnixNano())),
		Requests: counts.Requests,
		Errors:   counts.ErrorTotal(),
		Missed:   counts.Missed,
		// A copy: iv's bytes may alias the receive buffer (aliasedResponse).
		Latency: bytes.Clone(iv.GetHistograms().GetLatency()),
		CpuTime: iv.GetCpuTime(),
	}
}

// addInterval merges interval iv of agent a (with cpus usable CPUs, whose
// window starts at windowStart in its own clock) into m and sets *counts
// to the interval's counters; it returns the merged timeline point once
// every agent has sent the interval. counts is the caller's, reused from
// one interval to the next: a Counts is 5 KB (its status codes), which
// the merge's escaping Interval would otherwise put on the heap at every
// agent-interval. Errors: counters or histograms the merge rejects.
func addInterval(m *merge.Merger, a int, cpus int32, windowStart time.Time, iv *pb.Interval, counts *measure.Counts) (*merge.Point, error) {
	var err error
	if *counts, err = wire.CountsFromProto(iv.GetCounters()); err != nil {
		return nil, fmt.Errorf("interval %d: %w", iv.GetIndex(), err)
	}
	in := merge.Interval{
		Agent: a, Index: int(iv.GetIndex()),
		Start:  time.Unix(0, iv.GetStartUnixNano()).Sub(windowStart),
		Length: time.Duration(iv.GetEndUnixNano() - iv.GetStartUnixNano()),
		Counts: counts, CPUTime: iv.GetCpuTime().AsDuration(), CPUs: int(cpus),
	}
	for k := range hist.NumKinds {
		in.Histograms[k] = wire.HistogramBytes(iv.GetHistograms(), k)
	}
	return m.Add(&in)
}

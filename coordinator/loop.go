package coordinator

import (
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// event is one message (or the end) of one agent's Run stream.
type event struct {
	agent int
	msg   *pb.RunResponse
	err   error
}

// pump starts one receive pump per agent: each forwards its stream's
// messages, and then its end, to the returned channel. The pumps end when
// their stream ends or the run's context does (run.close joins them).
func (rn *run) pump() <-chan event {
	events := make(chan event, 16*len(rn.agents))
	for i, r := range rn.agents {
		rn.spawn(func() {
			for {
				msg, err := r.stream.Recv()
				select {
				case events <- event{agent: i, msg: msg, err: err}:
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

// loop merges every agent's intervals until each has sent Done and closed
// its stream, failed, or missed the run's deadline (its start plus warm-up,
// window, timeout and 10 s); it forwards StopRun to the agents and calls
// progress after each interval merged across agents. An agent's failure is
// kept in its row, not returned. Errors: the caller's context ending.
func (rn *run) loop(progress func(*pb.Progress)) error {
	p := rn.p
	events := rn.pump()
	limit := p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	deadline := time.NewTimer(time.Until(rn.startAt.Add(p.Warmup + limit + p.Timeout + 10*time.Second)))
	defer deadline.Stop()

	pending := len(rn.agents)
	stop := rn.active.stop // nil once handled
	for pending > 0 {
		var ev event
		select {
		case <-stop:
			stop = nil
			rn.stopAgents()
			continue
		case ev = <-events:
		case <-deadline.C:
			for _, r := range rn.agents {
				if r.done == nil && r.err == nil {
					r.err = errors.New("no result before the run's deadline")
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
		if rn.handle(ev, progress) {
			pending--
		}
	}
	return nil
}

// stopAgents forwards StopRun: it ends every agent's window now. Each
// still sends its last intervals and Done; one whose stream is broken
// fails through its Recv as usual.
func (rn *run) stopAgents() {
	rn.log.Info("stopping the run early: ending every agent's window")
	for _, r := range rn.agents {
		if r.done != nil || r.ended || r.err != nil {
			continue
		}
		if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Stop{Stop: &pb.Stop{}}}); err != nil {
			rn.log.Warn("send stop", "agent", r.meta.GetName(), "err", err)
		}
	}
}

// handle takes one event; it reports whether its agent is now finished
// (ended after Done, or failed).
func (rn *run) handle(ev event, progress func(*pb.Progress)) bool {
	r := rn.agents[ev.agent]
	if r.ended || r.err != nil {
		return false // already ended (a late message after the deadline)
	}
	if ev.err != nil && r.done != nil {
		// The stream's end after Done: the agent has released its
		// connections and is free for the next run.
		r.ended = true
		return true
	}
	if ev.err != nil {
		if errors.Is(ev.err, io.EOF) {
			ev.err = errors.New("stream ended without a result")
		}
		r.err = fmt.Errorf("agent %s: %w", r.meta.GetName(), ev.err)
		rn.log.Warn("agent failed mid-run; keeping its measurements so far", "agent", r.meta.GetName(), "err", ev.err)
		return true
	}
	switch msg := ev.msg.Msg.(type) {
	case *pb.RunResponse_Interval:
		pt, counts, err := addInterval(rn.m, ev.agent, r.cpus, rn.startAt.Add(r.offset+rn.p.Warmup), msg.Interval)
		if err != nil {
			rn.malformed(r, "interval", err)
			return true
		}
		r.counters.Add(&counts)
		r.cpu += msg.Interval.GetCpuTime().AsDuration()
		r.intervals++
		if pt != nil && progress != nil {
			progress(&pb.Progress{RunId: rn.id, Index: int32(pt.Index), Requests: pt.Requests, Errors: pt.Errors, P99Us: pt.P99, Interval: durationpb.New(pt.Length)})
		}
	case *pb.RunResponse_Done:
		if err := checkDone(rn.p, msg.Done, rn.startAt.Add(r.offset+rn.p.Warmup)); err != nil {
			rn.malformed(r, "result", err)
			return true
		}
		r.done = msg.Done
	default:
		rn.malformed(r, "message", fmt.Errorf("unexpected %T during the run", ev.msg.GetMsg()))
		return true
	}
	return false
}

// malformed fails agent r's share on a message it sent that the
// coordinator refuses (what names it): its row keeps what it sent before
// and names the error, and its stream's send side is closed, which ends
// the share on the agent (its load stops) while the run goes on.
func (rn *run) malformed(r *agentRun, what string, err error) {
	r.err = fmt.Errorf("agent %s sent a malformed %s: %w", r.meta.GetName(), what, err)
	rn.log.Warn("malformed message from an agent: its share ends; keeping its measurements so far", "agent", r.meta.GetName(), "err", err)
	if cerr := r.stream.CloseSend(); cerr != nil {
		rn.log.Debug("close send", "agent", r.meta.GetName(), "err", cerr)
	}
}

// addInterval merges interval iv of agent a (with cpus usable CPUs, whose
// window starts at windowStart in its own clock) into m; it returns the
// merged timeline point once every agent has sent the interval, and the
// interval's counters. Errors: counters or histograms the merge rejects.
func addInterval(m *merge.Merger, a int, cpus int32, windowStart time.Time, iv *pb.Interval) (*merge.Point, measure.Counts, error) {
	counts, err := wire.CountsFromProto(iv.GetCounters())
	if err != nil {
		return nil, measure.Counts{}, fmt.Errorf("interval %d: %w", iv.GetIndex(), err)
	}
	in := merge.Interval{
		Agent: a, Index: int(iv.GetIndex()),
		Start:  time.Unix(0, iv.GetStartUnixNano()).Sub(windowStart),
		Length: time.Duration(iv.GetEndUnixNano() - iv.GetStartUnixNano()),
		Counts: &counts, CPUTime: iv.GetCpuTime().AsDuration(), CPUs: int(cpus),
	}
	for k := range hist.NumKinds {
		in.Histograms[k] = wire.HistogramBytes(iv.GetHistograms(), k)
	}
	pt, err := m.Add(&in)
	return pt, counts, err
}

package coordinator

import (
	"fmt"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// checkDone validates an agent's Done against its plan p, before anything
// of it is kept: request counts in [0, wire.MaxCount] with in-flight at
// most issued, a window end within the plan's window and drain (from
// windowStart, the agent's window start in its own clock: at least the
// warm-up before it, at most the window plus the timeout and an interval
// after it), a first send within the run, at most one stage change per
// stage after the first, and at most the plan's HTTP/2 streams. Without
// it, one agent's bad window end would set the whole run's window (the
// longest) and its RPS. Errors name the field.
func checkDone(p plan.Plan, d *pb.Done, windowStart time.Time) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"issued", d.GetIssued()}, {"in_flight", d.GetInFlight()}} {
		if f.v < 0 || f.v > wire.MaxCount {
			return fmt.Errorf("done: %s = %d: want 0 to %d", f.name, f.v, int64(wire.MaxCount))
		}
	}
	if d.GetInFlight() > d.GetIssued() {
		return fmt.Errorf("done: in_flight %d above issued %d", d.GetInFlight(), d.GetIssued())
	}
	latest := latestEnd(p)
	if we := d.GetWindowEndUnixNano(); we != 0 {
		if off := time.Unix(0, we).Sub(windowStart); off < -p.Warmup || off > latest {
			return fmt.Errorf("done: window end %v from the window's start: want %v to %v", off, -p.Warmup, latest)
		}
	}
	if err := checkFirstSend(p, d.GetFirstSendUnixNano(), windowStart); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	if n, stages := len(d.GetStageChangeUnixNano()), len(p.Stages); n > max(stages-1, 0) {
		return fmt.Errorf("done: %d stage changes for %d stages: want at most %d", n, stages, max(stages-1, 0))
	}
	if ms := d.GetMaxStreams(); ms < 0 || int(ms) > p.MaxStreams {
		return fmt.Errorf("done: max_streams %d: want 0 to the plan's %d", ms, p.MaxStreams)
	}
	return nil
}

// checkFirstSend validates a first send fs (agent clock, unix ns; 0: none)
// of a Done or an Interval against p: within the run, from the warm-up's
// start (less an interval) to the window, timeout and an interval after
// windowStart.
func checkFirstSend(p plan.Plan, fs int64, windowStart time.Time) error {
	if fs == 0 {
		return nil
	}
	latest := latestEnd(p)
	if off := time.Unix(0, fs).Sub(windowStart); off < -p.Warmup-p.Interval || off > latest {
		return fmt.Errorf("first send %v from the window's start: want %v to %v", off, -p.Warmup, latest)
	}
	return nil
}

// latestEnd is the latest an agent's window may end from its start under
// p: the window (plan.MaxRunLength in count mode without a duration), the
// drain's timeout and an interval.
func latestEnd(p plan.Plan) time.Duration {
	limit := p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	return limit + p.Timeout + p.Interval
}

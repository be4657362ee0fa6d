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
	limit := p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	latest := limit + p.Timeout + p.Interval
	if we := d.GetWindowEndUnixNano(); we != 0 {
		if off := time.Unix(0, we).Sub(windowStart); off < -p.Warmup || off > latest {
			return fmt.Errorf("done: window end %v from the window's start: want %v to %v", off, -p.Warmup, latest)
		}
	}
	if fs := d.GetFirstSendUnixNano(); fs != 0 {
		if off := time.Unix(0, fs).Sub(windowStart); off < -p.Warmup-p.Interval || off > latest {
			return fmt.Errorf("done: first send %v from the window's start: want %v to %v", off, -p.Warmup, latest)
		}
	}
	if n, stages := len(d.GetStageChangeUnixNano()), len(p.Stages); n > max(stages-1, 0) {
		return fmt.Errorf("done: %d stage changes for %d stages: want at most %d", n, stages, max(stages-1, 0))
	}
	if ms := d.GetMaxStreams(); ms < 0 || int(ms) > p.MaxStreams {
		return fmt.Errorf("done: max_streams %d: want 0 to the plan's %d", ms, p.MaxStreams)
	}
	return nil
}

package merge

import (
	"fmt"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// check validates an interval from an agent before anything of it is
// merged: its agent is one of the merger's, its index is within the plan's
// window and not one the agent sent already (a repeat would count twice
// and finish a timeline point another agent has not sent), its start is its index's (Index ×
// Interval, within an interval: the agent computes it from the start
// instant), its length at most an interval, its CPU time not negative.
// Errors name the interval and the field.
func (m *Merger) check(iv *Interval) error {
	if iv.Agent < 0 || iv.Agent >= m.agents {
		return fmt.Errorf("interval %d: agent %d: want 0 to %d", iv.Index, iv.Agent, m.agents-1)
	}
	if iv.Counts == nil {
		return fmt.Errorf("interval %d: no counters", iv.Index)
	}
	step := m.p.Interval
	if step <= 0 {
		return fmt.Errorf("interval %d: the plan has no interval length", iv.Index)
	}
	limit := m.p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	maxIndex := int((limit + step - 1) / step) // the window's intervals, 0 to maxIndex-1, and one to spare
	if iv.Index < 0 || iv.Index > maxIndex {
		return fmt.Errorf("interval %d: index outside the plan's window: want 0 to %d", iv.Index, maxIndex)
	}
	if m.seen == nil {
		m.seen = make([][]uint64, m.agents)
	}
	if w := m.seen[iv.Agent]; iv.Index/64 < len(w) && w[iv.Index/64]&(1<<(iv.Index%64)) != 0 {
		return fmt.Errorf("interval %d sent twice by the same agent: want each once", iv.Index)
	}
	if want := time.Duration(iv.Index) * step; iv.Start < want-step || iv.Start > want+step {
		return fmt.Errorf("interval %d: start %v: want %v (index × interval)", iv.Index, iv.Start, want)
	}
	if iv.Length > step || iv.Length < -(limit+m.p.Warmup+m.p.Timeout) {
		return fmt.Errorf("interval %d: length %v: want at most the interval, %v", iv.Index, iv.Length, step)
	}
	if iv.CPUTime < 0 || iv.CPUs < 0 {
		return fmt.Errorf("interval %d: cpu time %v on %d cpus: want neither negative", iv.Index, iv.CPUTime, iv.CPUs)
	}
	return nil
}

// markSeen notes that agent a's interval k is merged.
func (m *Merger) markSeen(a, k int) {
	w := m.seen[a]
	for len(w) <= k/64 {
		w = append(w, 0)
	}
	w[k/64] |= 1 << (k % 64)
	m.seen[a] = w
}

package merge

import (
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestAddRefusesMalformedIntervals: an interval that would corrupt the
// merge (an unknown agent, an index outside the window, one sent twice, a
// start or length that is not its index's, negative CPU time) is an error
// naming it, and nothing of it is merged: the window's counts and the
// timeline hold only the good intervals.
func TestAddRefusesMalformedIntervals(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 2, Duration: 3 * time.Second}
	p.SetDefaults()
	empty := hist.New().EncodeV2()
	good := func(a, k int) *Interval {
		iv := &Interval{Agent: a, Index: k, Start: time.Duration(k) * time.Second, Length: time.Second, Counts: &measure.Counts{}}
		for kind := range hist.NumKinds {
			iv.Histograms[kind] = empty
		}
		iv.Counts.Errors[measure.ErrReset] = 1
		return iv
	}
	m := New(p, 2)
	if _, err := m.Add(good(0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(iv *Interval)
		want string
	}{
		{"agent", func(iv *Interval) { iv.Agent = 2 }, "interval 1: agent 2: want 0 to 1"},
		{"negative agent", func(iv *Interval) { iv.Agent = -1 }, "agent -1"},
		{"negative index", func(iv *Interval) { iv.Index = -1; iv.Start = -time.Second }, "interval -1: index outside the plan's window: want 0 to 3"},
		{"index past the window", func(iv *Interval) { iv.Index = 1 << 30 }, "interval 1073741824: index outside the plan's window"},
		{"repeat", func(iv *Interval) { iv.Index, iv.Start = 0, 0 }, "interval 0 sent twice by the same agent"},
		{"start", func(iv *Interval) { iv.Start = 5 * time.Second }, "interval 1: start 5s: want 1s (index × interval)"},
		{"length", func(iv *Interval) { iv.Length = time.Hour }, "interval 1: length 1h0m0s: want at most the interval"},
		{"cpu", func(iv *Interval) { iv.CPUTime = -time.Second }, "cpu time -1s"},
		{"no counters", func(iv *Interval) { iv.Counts = nil }, "interval 1: no counters"},
	} {
		iv := good(0, 1)
		tc.edit(iv)
		if _, err := m.Add(iv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Add = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if c := m.Counts(); c.ErrorTotal() != 1 {
		t.Errorf("window errors = %d after refused intervals, want 1 (the good one only)", c.ErrorTotal())
	}
	pt, err := m.Add(good(1, 0))
	if err != nil || pt == nil || pt.Errors != 2 {
		t.Fatalf("agent 1's interval 0: %+v, %v; want the point finished with 2 errors", pt, err)
	}
	if _, err := m.Add(good(0, 1)); err != nil {
		t.Errorf("agent 0's interval 1 after the refusals: %v", err)
	}
}

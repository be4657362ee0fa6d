package compare

import (
	"fmt"
	"strings"

	"github.com/phalanxload/phalanx/internal/report"
)

// Notes returns the lines a comparison prints before its table: what a
// one-run bootstrap cannot tell (OneRunNote), each run left out as
// client-bound (ExcludedNotes), each client-bound run kept, each partial
// run compared, the runs whose windows were short for their latency, and
// each pair of runs whose plans differ (PlanNotes).
func (r *Result) Notes() []string {
	var out []string
	if r.Method == Bootstrap {
		out = append(out, OneRunNote)
	}
	out = append(out, r.ExcludedNotes()...)
	for _, id := range r.ClientBound {
		out = append(out, "client-bound (kept): "+id)
	}
	for _, p := range r.Partial {
		out = append(out, fmt.Sprintf("partial (compared): %s run %s: %s; its figures cover less than its plan", p.Side, p.RunID, strings.Join(p.Reasons, "; ")))
	}
	if len(r.ShortWindows) > 0 {
		var runs []string
		for _, s := range r.ShortWindows {
			runs = append(runs, fmt.Sprintf("%s run %s (%s)", s.Side, s.RunID, strings.Join(s.Reasons, "; ")))
		}
		out = append(out, "short windows for their latency, with no warm-up (the report's warning): "+strings.Join(runs, ", ")+
			"; the RPS delta is biased by the difference; give a longer -d or a --warmup")
	}
	return append(out, r.PlanNotes()...)
}

// OneRunNote is the note of a comparison of one run per side (Bootstrap):
// its intervals are resampled, so its CI holds the variation within each
// run, not between runs, and two runs of one server may differ by more.
const OneRunNote = "one run per side: the CI covers the spread of each run's intervals, not the difference between two runs of the same server (a warm cache, where the connections landed), which can be larger; for a verdict on the servers, compare at least 4 runs per side (ab --repeats 5)"

// PlanNotes returns a line per pair of runs whose plans differ
// (PlanDifferences), listing the settings: "plans differ: candidate run B
// against baseline run A: Connections 10 → 20; URL ...".
func (r *Result) PlanNotes() []string {
	var out []string
	for i := 0; i < len(r.PlanDifferences); {
		d := r.PlanDifferences[i]
		var fields []string
		for ; i < len(r.PlanDifferences) && r.PlanDifferences[i].RunID == d.RunID && r.PlanDifferences[i].Of == d.Of; i++ {
			e := r.PlanDifferences[i]
			fields = append(fields, fmt.Sprintf("%s %s → %s", e.Field, e.A, e.B))
		}
		out = append(out, fmt.Sprintf("plans differ: %s run %s against %s run %s: %s", d.Side, d.RunID, d.OfSide, d.Of, strings.Join(fields, "; ")))
	}
	return out
}

// ExcludedNotes returns a line per run left out as client-bound, with its
// reasons.
func (r *Result) ExcludedNotes() []string {
	var out []string
	for _, e := range r.Excluded {
		out = append(out, fmt.Sprintf("left out %s run %s: client-bound (%s); --include-client-bound keeps it", e.Side, e.RunID, strings.Join(e.Reasons, "; ")))
	}
	return out
}

// HTML returns the page data of comparison res of baseline a and
// candidate b (the runs given to Compare): the statistics table (Rows, as
// coordctl compare prints it), the notes, the result's JSON, and each side
// built from the runs the comparison kept (report.BuildCompareSide).
// Errors: a run's corrupt histogram.
func HTML(res *Result, a, b []Run) (*report.HTMLCompare, error) {
	c := &report.HTMLCompare{Method: res.Method, Alpha: Alpha, Confidence: Confidence, Header: TableHeader, Rows: res.Rows(),
		Result: res, Notes: res.Notes()}
	var err error
	if c.Baseline, err = side("baseline", a, res.Baseline); err != nil {
		return nil, err
	}
	if c.Candidate, err = side("candidate", b, res.Candidate); err != nil {
		return nil, err
	}
	return c, nil
}

// side builds one side from its runs whose IDs are in kept.
func side(label string, rs []Run, kept []string) (report.CompareSide, error) {
	var runs []*report.Run
	var reps []*report.Report
	for _, r := range rs {
		for _, id := range kept {
			if r.Report.RunID == id {
				runs, reps = append(runs, r.Run), append(reps, r.Report)
				break
			}
		}
	}
	return report.BuildCompareSide(label, runs, reps)
}

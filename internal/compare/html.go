package compare

import (
	"fmt"
	"strings"

	"github.com/phalanxload/phalanx/internal/report"
)

// Notes returns the lines a comparison prints before its table: each run
// left out as client-bound (ExcludedNotes), and each client-bound run
// kept.
func (r *Result) Notes() []string {
	out := r.ExcludedNotes()
	for _, id := range r.ClientBound {
		out = append(out, "client-bound (kept): "+id)
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

package report

import (
	"fmt"
	"io"

	"github.com/phalanxload/phalanx/internal/hist"
)

// CompareRow is one row of a comparison's statistics table: its cells in
// the table's columns (internal/compare's TableHeader) as coordctl compare
// prints them, and whether the delta is significant.
type CompareRow struct {
	Cells       []string `json:"cells"`
	Significant bool     `json:"significant"`
}

// HTMLCompare is the "compare" view of the page's data block: an A/B
// comparison (coordctl compare, coordctl ab) with its statistics table and
// both sides' runs, timelines and spectra, to overlay.
type HTMLCompare struct {
	// Method, Alpha and Confidence say how the table was computed
	// (internal/compare's method names).
	Method     string  `json:"method"`
	Alpha      float64 `json:"alpha"`
	Confidence float64 `json:"confidence"`
	// Header and Rows are the statistics table exactly as coordctl compare
	// prints it; Result is the comparison's JSON (coordctl compare
	// --json), for the numbers behind the text.
	Header []string     `json:"header"`
	Rows   []CompareRow `json:"rows"`
	Result any          `json:"result"`
	// Notes are lines to show above the table: runs left out as
	// client-bound, client-bound runs kept.
	Notes     []string    `json:"notes,omitempty"`
	Baseline  CompareSide `json:"baseline"`
	Candidate CompareSide `json:"candidate"`
}

// CompareSide is one side of a comparison: its runs, its timeline (the
// side's runs merged interval by interval, by index) and its spectra (the
// side's runs' whole-window histograms merged).
type CompareSide struct {
	Label string           `json:"label"`
	Runs  []CompareSideRun `json:"runs"`
	// Timeline's columns have one entry per interval index: StartS is the
	// interval's offset from its window's start (the first run's that has
	// it), Runs how many of the side's runs have it, RPS their mean, and
	// the latency percentiles (µs) those of the runs' interval histograms
	// merged (0 without a response).
	Timeline CompareTimeline `json:"timeline"`
	// Spectra are as HTMLSpectra: the side's runs' histograms merged.
	Spectra HTMLSpectra `json:"spectra"`
}

// CompareSideRun is one run of a side, as its row in the page.
type CompareSideRun struct {
	RunID     string   `json:"run_id"`
	Target    string   `json:"target"`
	StartedAt string   `json:"started_at"`
	DurationS float64  `json:"duration_s"`
	Mode      string   `json:"mode"`
	RPS       float64  `json:"rps"`
	P99Us     int64    `json:"p99_us"`
	Errors    int64    `json:"errors"`
	Tags      []string `json:"tags,omitempty"`
}

// CompareTimeline is a side's timeline as columns (see CompareSide).
type CompareTimeline struct {
	StartS []float64 `json:"start_s"`
	Runs   []int     `json:"runs"`
	RPS    []float64 `json:"rps"`
	P50Us  []int64   `json:"p50_us"`
	P90Us  []int64   `json:"p90_us"`
	P99Us  []int64   `json:"p99_us"`
	MaxUs  []int64   `json:"max_us"`
}

// BuildCompareSide computes one side of a comparison from its runs and
// their reports (Build's, in the same order), labelled label. The
// intervals are decoded one at a time (sparse). Errors: a corrupt
// histogram, named with its run and interval.
func BuildCompareSide(label string, runs []*Run, reps []*Report) (CompareSide, error) {
	side := CompareSide{Label: label}
	n := 0
	for i, r := range runs {
		n = max(n, len(r.Timeline))
		rep := reps[i]
		row := CompareSideRun{RunID: rep.RunID, Target: rep.Target, StartedAt: rep.StartedAt.UTC().Format("2006-01-02T15:04:05Z"),
			DurationS: rep.DurationS, Mode: rep.Mode, RPS: rep.RPS, Tags: rep.Tags}
		if rep.Latency != nil {
			row.P99Us = rep.Latency.P99
		}
		for _, e := range rep.Errors {
			row.Errors += e
		}
		side.Runs = append(side.Runs, row)
	}
	t := &side.Timeline
	t.StartS, t.Runs, t.RPS = make([]float64, n), make([]int, n), make([]float64, n)
	t.P50Us, t.P90Us, t.P99Us, t.MaxUs = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	var dec hist.Decoder
	var s hist.Sparse
	var acc hist.Accumulator
	for i := range n {
		acc.Reset()
		for _, r := range runs {
			if i >= len(r.Timeline) {
				continue
			}
			pt := &r.Timeline[i]
			if t.Runs[i] == 0 {
				t.StartS[i] = pt.Start.Seconds()
			}
			t.Runs[i]++
			if pt.Length > 0 {
				t.RPS[i] += float64(pt.Requests) / pt.Length.Seconds()
			}
			if err := pt.Sparse(&dec, hist.Latency, &s); err != nil {
				return side, fmt.Errorf("html comparison: run %s interval %d: %w", r.ID, pt.Index, err)
			}
			acc.Add(&s)
		}
		if t.Runs[i] > 0 {
			t.RPS[i] /= float64(t.Runs[i])
		}
		if acc.Count() > 0 {
			if err := sparseOf(&dec, acc.Histogram(), &s); err != nil {
				return side, fmt.Errorf("html comparison: interval %d: %w", i, err)
			}
			q := sparsePercentiles(&s, runSubBucketHalfMagnitude, 50, 90, 99, 100)
			t.P50Us[i], t.P90Us[i], t.P99Us[i], t.MaxUs[i] = q[0], q[1], q[2], q[3]
		}
	}
	side.Spectra.SigFigs = hist.SigFigs
	open := len(reps) > 0 && reps[0].Mode == "open"
	kinds := []struct {
		k   hist.Kind
		out *[]int64
	}{{hist.Latency, &side.Spectra.Latency}, {hist.Connect, &side.Spectra.Connect}, {hist.TLSFull, &side.Spectra.TLSFull},
		{hist.TLSResumed, &side.Spectra.TLSResumed}, {hist.TTFB, &side.Spectra.TTFB}}
	if open {
		kinds = append(kinds, struct {
			k   hist.Kind
			out *[]int64
		}{hist.Service, &side.Spectra.Service})
	}
	for _, k := range kinds {
		merged := hist.New()
		for _, r := range runs {
			if r.Histograms == nil || r.Histograms.Get(k.k) == nil {
				continue
			}
			if err := merged.Merge(r.Histograms.Get(k.k)); err != nil {
				return side, fmt.Errorf("html comparison: run %s %s: %w", r.ID, k.k, err)
			}
		}
		if merged.Count() == 0 {
			continue
		}
		if err := sparseOf(&dec, merged, &s); err != nil {
			return side, fmt.Errorf("html comparison: %w", err)
		}
		pairs := make([]int64, 0, 2*len(s.Values))
		for j, v := range s.Values {
			pairs = append(pairs, v, s.Counts[j])
		}
		*k.out = pairs
	}
	return side, nil
}

// WriteCompareHTML writes a comparison as one self-contained HTML page,
// the data block's "compare" view: the statistics table (the rows
// coordctl compare prints), each side's runs, both sides' latency
// timelines overlaid (p50 and p99 per interval, RPS) and their percentile
// spectra overlaid on HdrHistogram's log(1/(1−p)) axis (latency, in open
// loop service time, and the phases). Errors: w's.
func WriteCompareHTML(w io.Writer, c *HTMLCompare, opts HTMLOptions) error {
	if opts.Title == "" {
		opts.Title = "Phalanx comparison: " + Plural(int64(len(c.Baseline.Runs)), "baseline run") + " vs " + Plural(int64(len(c.Candidate.Runs)), "candidate run")
	}
	return writeHTMLPage(w, &HTMLData{Format: HTMLFormat, View: "compare", Compare: c}, opts)
}

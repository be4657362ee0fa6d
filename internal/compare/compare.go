// Package compare compares two sets of runs, a baseline (A) and a
// candidate (B), metric by metric, as benchstat compares Go benchmarks:
// each side's median, the delta of the medians in %, its 95 % confidence
// interval and the p-value of a Mann-Whitney U test (golang.org/x/perf/
// benchmath's AssumeNothing), the delta shown as "~" when p ≥ α = 0.05.
//
// With one run per side there is no sample of runs: the percentiles, RPS
// and error rate are then compared by a bootstrap over the runs' intervals
// (each side's per-interval merged histograms resampled with replacement,
// Bootstraps times; percentile bootstrap CI of the delta; the delta is
// significant when the CI excludes 0). Results say which method they used.
package compare

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// Alpha is the significance level (benchstat's default).
const Alpha = 0.05

// Confidence is the confidence level of every interval.
const Confidence = 0.95

// MinIntervals is the fewest intervals each run of a one-run-per-side
// comparison must have. A bootstrap over n intervals has only
// C(2n-1, n) distinct resamples: 1 for one interval, 3 for two, so its
// CI collapses onto the point estimate and any difference, noise
// included, would be "significant"; from 5 intervals (126 resamples)
// the CI reflects the intervals' spread.
const MinIntervals = 5

// ErrTooFewIntervals: a one-run-per-side comparison whose run has fewer
// than MinIntervals intervals. The error wrapping it names the run.
var ErrTooFewIntervals = fmt.Errorf("compare: one run per side is compared over its intervals, which needs at least %d per run (a longer window, -d, or at least %d runs per side)", MinIntervals, MinRuns)

// MinRuns is the fewest runs per side for which the Mann-Whitney U test
// can reach p < Alpha (4 + 4 runs give p ≥ 0.029; 3 + 3 never below 0.1).
const MinRuns = 4

// Bootstraps is the number of bootstrap resamples behind each CI.
const Bootstraps = 2000

// Method names.
const (
	MannWhitney = "mann-whitney"
	Bootstrap   = "bootstrap (intervals resampled)"
)

// ErrTooFew is returned when a side has more than one run but fewer than
// MinRuns.
var ErrTooFew = fmt.Errorf("compare: need at least %d runs per side (or exactly one per side, for a bootstrap over intervals)", MinRuns)

// Run is one run as the comparison sees it: its report and run (the run's
// Timeline gives the per-interval histograms of the bootstrap).
type Run struct {
	Report *report.Report
	Run    *report.Run
	// Plan is the plan the run ran (its stored plan), compared across the
	// runs (Result.PlanDifferences); a zero Plan on every run compares
	// nothing.
	Plan plan.Plan
}

// Metric is one compared figure. Values are medians over the runs
// (Mann-Whitney) or the runs' own figures (bootstrap); latencies in µs,
// RPS in requests/s, errors as a fraction of issued requests.
type Metric struct {
	Name      string  `json:"name"`
	Unit      string  `json:"unit"`
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	// DeltaPct is (Candidate / Baseline − 1) × 100; CILoPct..CIHiPct its
	// 95 % interval, a percentile bootstrap (Bootstraps resamples): of the
	// runs on each side with Mann-Whitney, of the intervals with one run
	// per side.
	DeltaPct float64 `json:"delta_pct"`
	CILoPct  float64 `json:"ci_lo_pct"`
	CIHiPct  float64 `json:"ci_hi_pct"`
	// P is the p-value (Mann-Whitney U, or the bootstrap's two-sided
	// share of resampled deltas across 0); Significant is P < Alpha.
	P           float64 `json:"p"`
	Significant bool    `json:"significant"`
	// BaselineRuns and CandidateRuns are each run's value (Mann-Whitney).
	BaselineRuns  []float64 `json:"baseline_runs,omitempty"`
	CandidateRuns []float64 `json:"candidate_runs,omitempty"`
	// Undefined is set when the delta has no meaning (a zero baseline).
	Undefined bool `json:"undefined,omitempty"`
}

// Result is a comparison.
type Result struct {
	Method    string   `json:"method"`
	Baseline  []string `json:"baseline_runs"`
	Candidate []string `json:"candidate_runs"`
	// Excluded are the client-bound runs left out, with their reasons.
	Excluded []RunNote `json:"excluded,omitempty"`
	// ClientBound lists the client-bound runs kept (IncludeClientBound).
	ClientBound []string `json:"client_bound_included,omitempty"`
	// Partial lists the runs compared that were not whole (report
	// Partial: an agent lost, or coordctl's coordinator lost), each with
	// what it lost: their figures cover less load, or a shorter window,
	// than their plan's.
	Partial []RunNote `json:"partial_runs,omitempty"`
	// ShortWindows lists the runs compared whose window was short for
	// their latency (report.Report.ShortWindow): their RPS undercounts the
	// steady rate by up to the share given, which differs between servers
	// of different latency, so it biases the RPS delta.
	ShortWindows []RunNote `json:"short_windows,omitempty"`
	// PlanDifferences are the settings the compared runs' plans do not
	// share (plan.Diff, secrets redacted): the candidate side's first run
	// against the baseline's, and each run of a side against that side's
	// first. A comparison of runs whose plans differ in more than the
	// setting under test may not measure what it is meant to.
	PlanDifferences []PlanDifference `json:"plan_differences,omitempty"`
	Metrics         []Metric         `json:"metrics"`
}

// PlanDifference is one setting in which the plan of run RunID (on side
// Side, "baseline" or "candidate") differs from run Of's (on side OfSide):
// the candidate's first run against the baseline's, or a run against its
// own side's first.
type PlanDifference struct {
	Side   string `json:"side"`
	RunID  string `json:"run_id"`
	OfSide string `json:"of_side"`
	Of     string `json:"of"`
	plan.Difference
}

// RunNote is a run of a comparison and what the comparison says of it:
// why it was left out (Result.Excluded), what a partial one lost
// (Result.Partial), how much a short window undercounts its RPS
// (Result.ShortWindows).
type RunNote struct {
	RunID   string   `json:"run_id"`
	Side    string   `json:"side"`
	Reasons []string `json:"reasons"`
}

// extractor gives one metric's value from a report (ok false: none).
type extractor struct {
	name, unit string
	get        func(r *report.Report) (float64, bool)
}

func pct(name string, p func(s *hist.Summary) int64, s func(r *report.Report) *hist.Summary) extractor {
	return extractor{name, "µs", func(r *report.Report) (float64, bool) {
		if v := s(r); v != nil {
			return float64(p(v)), true
		}
		return 0, false
	}}
}

func latency(r *report.Report) *hist.Summary { return r.Latency }
func p99(s *hist.Summary) int64              { return s.P99 }

// errorRate is the failed share of issued requests.
func errorRate(r *report.Report) (float64, bool) {
	if r.Issued == 0 {
		return 0, false
	}
	var n int64
	for _, e := range r.Errors {
		n += e
	}
	return float64(n) / float64(r.Issued), true
}

// metrics are the compared figures, in output order; phases are named as
// --threshold names them.
var metrics = []extractor{
	{"rps", "req/s", func(r *report.Report) (float64, bool) { return r.RPS, true }},
	pct("p50", func(s *hist.Summary) int64 { return s.P50 }, latency),
	pct("p90", func(s *hist.Summary) int64 { return s.P90 }, latency),
	pct("p99", p99, latency),
	pct("p99.9", func(s *hist.Summary) int64 { return s.P999 }, latency),
	{"errors", "ratio", errorRate},
	pct("connect.p99", p99, func(r *report.Report) *hist.Summary { return r.ConnectUs }),
	pct("tls.p99", p99, func(r *report.Report) *hist.Summary { return r.TLSHandshakeUs }),
	pct("tls_full.p99", p99, func(r *report.Report) *hist.Summary { return r.TLSHandshakeFullUs }),
	pct("tls_resumed.p99", p99, func(r *report.Report) *hist.Summary { return r.TLSHandshakeResumedUs }),
	pct("ttfb.p99", p99, func(r *report.Report) *hist.Summary { return r.TTFBUs }),
	pct("service.p99", p99, func(r *report.Report) *hist.Summary { return r.ServiceTimeUs }),
}

// Compare compares baseline a with candidate b. Client-bound runs are
// left out (listed in Excluded) unless includeClientBound. Errors: no run
// on a side, ErrTooFew, or (one run per side) ErrTooFewIntervals. seed
// seeds the bootstrap (results are reproducible for a seed).
func Compare(a, b []Run, includeClientBound bool, seed uint64) (*Result, error) {
	res := &Result{}
	a = res.keep(a, "baseline", includeClientBound)
	b = res.keep(b, "candidate", includeClientBound)
	for _, r := range a {
		res.Baseline = append(res.Baseline, r.Report.RunID)
	}
	for _, r := range b {
		res.Candidate = append(res.Candidate, r.Report.RunID)
	}
	if len(a) > 0 && len(b) > 0 {
		res.planDiffs("candidate", "baseline", a[0], b[:1])
	}
	if len(a) > 1 {
		res.planDiffs("baseline", "baseline", a[0], a[1:])
	}
	if len(b) > 1 {
		res.planDiffs("candidate", "candidate", b[0], b[1:])
	}
	switch {
	case len(a) == 0 || len(b) == 0:
		return res, errors.New("compare: a side has no run to compare (client-bound runs are left out unless --include-client-bound)")
	case len(a) == 1 && len(b) == 1:
		res.Method = Bootstrap
		var err error
		res.Metrics, err = bootstrap(a[0], b[0], rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		return res, err
	case len(a) < MinRuns || len(b) < MinRuns:
		return res, ErrTooFew
	}
	res.Method = MannWhitney
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, m := range metrics {
		va, vb := values(a, m), values(b, m)
		if len(va) < len(a) || len(vb) < len(b) {
			continue // not measured in every run (a phase without TLS)
		}
		res.Metrics = append(res.Metrics, mannWhitney(m, va, vb, rng))
	}
	return res, nil
}

// planDiffs adds how the plan of each of runs (on side) differs from of's
// (on ofSide). A run without a plan (no URL: coordctl ab's, whose plans
// differ by the URL alone) is not compared. The stored plan leaves the
// body and the CA out, but the plan hash covers them: plans the diff finds
// equal whose hashes differ, under the same coordinator build (the hash's
// definition may change between builds), differ in one of those.
func (res *Result) planDiffs(side, ofSide string, of Run, runs []Run) {
	for _, r := range runs {
		if of.Plan.URL == "" || r.Plan.URL == "" {
			continue
		}
		ds := plan.Diff(of.Plan, r.Plan)
		if pa, pb := of.Report.Provenance, r.Report.Provenance; len(ds) == 0 && hashesDiffer(pa, pb) {
			ds = []plan.Difference{{Field: "Body or TLS.CAPEM (not stored; the plan hash)", A: pa.PlanHash, B: pb.PlanHash}}
		}
		for _, d := range ds {
			res.PlanDifferences = append(res.PlanDifferences,
				PlanDifference{Side: side, RunID: r.Report.RunID, OfSide: ofSide, Of: of.Report.RunID, Difference: d})
		}
	}
}

// hashesDiffer reports whether two runs' plan hashes are known and differ
// under one coordinator build.
func hashesDiffer(a, b *report.Provenance) bool {
	return a != nil && b != nil && a.PlanHash != "" && b.PlanHash != "" && a.PlanHash != b.PlanHash &&
		a.CoordinatorVersion == b.CoordinatorVersion && a.CoordinatorCommit == b.CoordinatorCommit
}

func (res *Result) keep(rs []Run, side string, include bool) []Run {
	var out []Run
	for _, r := range rs {
		if r.Report.ClientBound {
			if !include {
				res.Excluded = append(res.Excluded, RunNote{r.Report.RunID, side, r.Report.ClientBoundReasons})
				continue
			}
			res.ClientBound = append(res.ClientBound, r.Report.RunID)
		}
		if r.Report.Partial {
			res.Partial = append(res.Partial, RunNote{r.Report.RunID, side, partialReasons(r.Report)})
		}
		if share, ok := r.Report.ShortWindow(); ok {
			res.ShortWindows = append(res.ShortWindows, RunNote{r.Report.RunID, side, []string{fmt.Sprintf("its RPS undercounts by up to about %.1f %%", 100*share)}})
		}
		out = append(out, r)
	}
	return out
}

// partialReasons says what a partial run lost: each agent (when, how, its
// share) and the window it kept against the plan's.
func partialReasons(r *report.Report) []string {
	var out []string
	for _, l := range r.LostAgents {
		out = append(out, fmt.Sprintf("lost agent %s after %.2fs (%s)", l.Name, l.LostAtS, l.How()))
	}
	if r.CoordinatorLost != "" {
		out = append(out, "coordctl lost the coordinator: "+r.CoordinatorLost)
	}
	if r.PlanDurationS > 0 && r.DurationS < r.PlanDurationS {
		out = append(out, fmt.Sprintf("its window %.2fs of the planned %.2fs", r.DurationS, r.PlanDurationS))
	}
	if len(out) == 0 {
		out = append(out, "not whole")
	}
	return out
}

func values(rs []Run, m extractor) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := m.get(r.Report); ok {
			out = append(out, v)
		}
	}
	return out
}

func mannWhitney(m extractor, va, vb []float64, rng *rand.Rand) Metric {
	sa := benchmath.NewSample(va, &benchmath.DefaultThresholds)
	sb := benchmath.NewSample(vb, &benchmath.DefaultThresholds)
	ma := benchmath.AssumeNothing.Summary(sa, Confidence)
	mb := benchmath.AssumeNothing.Summary(sb, Confidence)
	c := benchmath.AssumeNothing.Compare(sa, sb)
	out := Metric{Name: m.name, Unit: m.unit, Baseline: ma.Center, Candidate: mb.Center, P: c.P, Significant: c.P < c.Alpha,
		BaselineRuns: append([]float64(nil), va...), CandidateRuns: append([]float64(nil), vb...)}
	if ma.Center == 0 {
		out.Undefined = mb.Center != 0
		return out
	}
	out.DeltaPct = (mb.Center/ma.Center - 1) * 100
	// The delta's CI: a percentile bootstrap of the ratio of medians,
	// each side's runs resampled with replacement (benchmath gives no
	// interval of a difference, nor of a median under 6 runs).
	var d []float64
	ra, rb := make([]float64, len(va)), make([]float64, len(vb))
	for range Bootstraps {
		for i := range ra {
			ra[i] = va[rng.IntN(len(va))]
		}
		for i := range rb {
			rb[i] = vb[rng.IntN(len(vb))]
		}
		if x := median(ra); x > 0 {
			d = append(d, (median(rb)/x-1)*100)
		}
	}
	if len(d) > 0 {
		sort.Float64s(d)
		out.CILoPct, out.CIHiPct = quantile(d, (1-Confidence)/2), quantile(d, 1-(1-Confidence)/2)
	}
	return out
}

// median sorts v and returns its median.
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// sideIntervals are one run's intervals as the bootstrap resamples them:
// each interval's latency decoded once into sparse form (its non-empty
// buckets only, not a full histogram).
type sideIntervals struct {
	lat              []hist.Sparse
	seconds          []float64
	requests, errors []int64
}

func intervalsOf(r *report.Run) (sideIntervals, error) {
	var s sideIntervals
	var dec hist.Decoder
	s.lat = make([]hist.Sparse, len(r.Timeline))
	for i := range r.Timeline {
		iv := &r.Timeline[i]
		if err := iv.Sparse(&dec, hist.Latency, &s.lat[i]); err != nil {
			return s, fmt.Errorf("compare: run %s interval %d: %w", r.ID, iv.Index, err)
		}
		s.seconds = append(s.seconds, iv.Length.Seconds())
		s.requests = append(s.requests, iv.Requests)
		s.errors = append(s.errors, iv.Errors)
	}
	return s, nil
}

// figures are one (resampled) run's compared figures, in bootMetrics
// order; NaN when not measured.
func (s sideIntervals) figures(idx []int) []float64 {
	var acc hist.Accumulator
	var secs float64
	var req, errs int64
	for _, i := range idx {
		acc.Add(&s.lat[i])
		secs += s.seconds[i]
		req += s.requests[i]
		errs += s.errors[i]
	}
	out := []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	if secs > 0 {
		out[0] = float64(req) / secs
	}
	if acc.Count() > 0 {
		h := acc.Histogram()
		for k, p := range []float64{50, 90, 99, 99.9} {
			out[1+k] = float64(h.ValueAtPercentile(p))
		}
	}
	if req+errs > 0 {
		out[5] = float64(errs) / float64(req+errs)
	}
	return out
}

// bootMetrics are the metrics the bootstrap compares: those the intervals
// carry (no phase histograms per interval).
var bootMetrics = metrics[:6]

func bootstrap(a, b Run, rng *rand.Rand) ([]Metric, error) {
	ia, err := intervalsOf(a.Run)
	if err != nil {
		return nil, err
	}
	ib, err := intervalsOf(b.Run)
	if err != nil {
		return nil, err
	}
	for _, side := range []struct {
		id string
		n  int
	}{{a.Report.RunID, len(ia.lat)}, {b.Report.RunID, len(ib.lat)}} {
		if side.n < MinIntervals {
			return nil, fmt.Errorf("%w: run %s has %d", ErrTooFewIntervals, side.id, side.n)
		}
	}
	all := func(n int) []int {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	fa, fb := ia.figures(all(len(ia.lat))), ib.figures(all(len(ib.lat)))
	deltas := make([][]float64, len(bootMetrics))
	ra, rb := make([]int, len(ia.lat)), make([]int, len(ib.lat))
	for range Bootstraps {
		for i := range ra {
			ra[i] = rng.IntN(len(ra))
		}
		for i := range rb {
			rb[i] = rng.IntN(len(rb))
		}
		xa, xb := ia.figures(ra), ib.figures(rb)
		for k := range bootMetrics {
			if xa[k] > 0 && !math.IsNaN(xb[k]) {
				deltas[k] = append(deltas[k], (xb[k]/xa[k]-1)*100)
			}
		}
	}
	var out []Metric
	for k, m := range bootMetrics {
		if math.IsNaN(fa[k]) || math.IsNaN(fb[k]) {
			continue
		}
		mt := Metric{Name: m.name, Unit: m.unit, Baseline: fa[k], Candidate: fb[k], P: 1}
		d := deltas[k]
		if fa[k] == 0 || len(d) < Bootstraps/2 {
			mt.Undefined = fa[k] != fb[k]
			out = append(out, mt)
			continue
		}
		sort.Float64s(d)
		mt.DeltaPct = (fb[k]/fa[k] - 1) * 100
		mt.CILoPct, mt.CIHiPct = quantile(d, (1-Confidence)/2), quantile(d, 1-(1-Confidence)/2)
		below := float64(sort.SearchFloat64s(d, 0)) / float64(len(d))
		above := float64(len(d)-sort.Search(len(d), func(i int) bool { return d[i] > 0 })) / float64(len(d))
		mt.P = math.Min(1, 2*math.Min(below+(1-below-above)/2, above+(1-below-above)/2))
		mt.Significant = mt.CILoPct > 0 || mt.CIHiPct < 0
		out = append(out, mt)
	}
	return out, nil
}

// quantile returns sorted d's q quantile (nearest rank).
func quantile(d []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(0, min(len(d)-1, i))]
}

// TableHeader is the statistics table's header, as coordctl compare prints
// it and the HTML comparison shows it.
var TableHeader = []string{"metric", "baseline", "candidate", "delta", "95% CI", "p"}

// Rows returns the statistics table, one row per metric in TableHeader's
// columns: the text of coordctl compare and the HTML comparison both
// print these strings. The delta is "~" when not significant and "?"
// (with CI "-") when undefined; values are formatted by FormatValue.
func (r *Result) Rows() []report.CompareRow {
	out := make([]report.CompareRow, 0, len(r.Metrics))
	for _, m := range r.Metrics {
		delta, ci := "~", fmt.Sprintf("%+.1f%% .. %+.1f%%", m.CILoPct, m.CIHiPct)
		switch {
		case m.Undefined:
			delta, ci = "?", "-"
		case m.Significant:
			delta = fmt.Sprintf("%+.2f%%", m.DeltaPct)
		}
		out = append(out, report.CompareRow{Cells: []string{m.Name, FormatValue(m.Baseline, m.Unit), FormatValue(m.Candidate, m.Unit), delta, ci, fmt.Sprintf("%.3f", m.P)},
			Significant: m.Significant && !m.Undefined})
	}
	return out
}

// FormatValue formats a metric's value in its unit: a duration for µs
// (time.Duration's String), a percentage for a ratio, else a rate per
// second.
func FormatValue(v float64, unit string) string {
	switch unit {
	case "µs":
		return (time.Duration(v) * time.Microsecond).String()
	case "ratio":
		return fmt.Sprintf("%.3f%%", v*100)
	}
	return fmt.Sprintf("%.1f/s", v)
}

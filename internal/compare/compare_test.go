package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

func runsOf(p50s ...int64) []Run {
	var out []Run
	for i, v := range p50s {
		out = append(out, Run{Report: &report.Report{RunID: string(rune('a' + i)), RPS: float64(v), Issued: 10,
			Latency: &hist.Summary{P50: v, P90: v, P99: v, P999: v}}})
	}
	return out
}

func metric(t *testing.T, res *Result, name string) Metric {
	t.Helper()
	for _, m := range res.Metrics {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no metric %s in %+v", name, res.Metrics)
	return Metric{}
}

// TestMannWhitneySeparated: 5 + 5 runs whose p50s are all 20 % apart are
// significant (p = 2/252) with a CI around +20 %; interleaved values are
// not.
func TestMannWhitneySeparated(t *testing.T) {
	res, err := Compare(runsOf(1000, 1010, 990, 1005, 995), runsOf(1200, 1212, 1188, 1206, 1194), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := metric(t, res, "p50")
	if res.Method != MannWhitney || !m.Significant || m.P > 0.01 || math.Abs(m.DeltaPct-20) > 1e-9 || m.CILoPct > 20 || m.CIHiPct < 20 || m.CILoPct < 15 || m.CIHiPct > 25 {
		t.Errorf("%s: %+v", res.Method, m)
	}
	res, err = Compare(runsOf(1000, 1010, 990, 1005, 995), runsOf(1001, 1011, 991, 1004, 994), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := metric(t, res, "p50"); m.Significant || m.CILoPct > 0 || m.CIHiPct < 0 {
		t.Errorf("interleaved: %+v", m)
	}
}

// TestTooFewAndClientBound: 2 + 2 runs need at least MinRuns; a
// client-bound run is left out unless asked for.
func TestTooFewAndClientBound(t *testing.T) {
	if _, err := Compare(runsOf(1, 2), runsOf(1, 2), false, 1); err != ErrTooFew {
		t.Errorf("2 + 2 runs: %v, want ErrTooFew", err)
	}
	a := runsOf(1000, 1010, 990, 1005, 995)
	a[0].Report.ClientBound, a[0].Report.ClientBoundReasons = true, []string{"agent x: CPU 97 % busy"}
	res, err := Compare(a, runsOf(1000, 1010, 990, 1005, 995), false, 1)
	if err != nil || len(res.Excluded) != 1 || res.Excluded[0].RunID != "a" || len(res.Baseline) != 4 {
		t.Errorf("client-bound left out: %+v, %v", res, err)
	}
	res, err = Compare(a, runsOf(1000, 1010, 990, 1005, 995), true, 1)
	if err != nil || len(res.Excluded) != 0 || len(res.ClientBound) != 1 || len(res.Baseline) != 5 {
		t.Errorf("client-bound kept: %+v, %v", res, err)
	}
}

// intervalRun is a one-run comparison's run: n intervals of 1 s, each
// with 100 latencies around base µs.
func intervalRun(id string, n int, base int64) Run {
	r := &report.Run{ID: id}
	for i := range n {
		h := hist.New()
		for k := range int64(100) {
			h.RecordMicros(base + (k*7+int64(i)*13)%(base/10))
		}
		r.Timeline = append(r.Timeline, report.Interval{Index: int32(i), Length: 1e9, Requests: 100, V2: [hist.NumKinds][]byte{hist.Latency: h.EncodeV2()}})
	}
	return Run{Report: &report.Report{RunID: id}, Run: r}
}

// TestPartialRunNoted: a partial run is compared, and the notes say what
// it lost (the agent, when and how, and the window kept against the
// plan's), in the text and in the JSON's partial_runs; a partial run left
// out as client-bound is not listed as compared.
func TestPartialRunNoted(t *testing.T) {
	a := runsOf(1000, 1010, 990, 1005, 995)
	a[1].Report.Partial, a[1].Report.DurationS, a[1].Report.PlanDurationS = true, 7.11, 8
	a[1].Report.LostAgents = []report.LostAgent{{Name: "a2", LostAtS: 3.28, Error: "agent a2: silent for 2.5s"}}
	b := runsOf(1000, 1010, 990, 1005, 995)
	b[2].Report.Partial, b[2].Report.ClientBound = true, true
	res, err := Compare(a, b, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := "partial (compared): baseline run b: lost agent a2 after 3.28s (silent for 2.5s); its window 7.11s of the planned 8.00s; its figures cover less than its plan"
	if len(res.Partial) != 1 || !slices.Contains(res.Notes(), want) {
		t.Errorf("partial runs %+v, notes %q; want one, noted %q", res.Partial, res.Notes(), want)
	}
	js, err := json.Marshal(res)
	if err != nil || !strings.Contains(string(js), `"partial_runs":[{"run_id":"b","side":"baseline"`) {
		t.Errorf("JSON %s (%v): want partial_runs naming run b", js, err)
	}
}

// TestShortWindowsNoted: runs whose window was short for their latency
// (no warm-up, the mean latency 10 % of a 1 s window) are noted: their
// RPS delta is biased.
func TestShortWindowsNoted(t *testing.T) {
	a, b := runsOf(1000, 1010, 990, 1005, 995), runsOf(1000, 1010, 990, 1005, 995)
	for _, r := range a {
		r.Report.Requests, r.Report.InFlight, r.Report.DurationS, r.Report.Latency.Mean = 36, 4, 1, 100_000
	}
	res, err := Compare(a, b, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ShortWindows) != 5 || res.ShortWindows[0].Reasons[0] != "its RPS undercounts by up to about 10.0 %" {
		t.Fatalf("short windows %+v, want the 5 baseline runs", res.ShortWindows)
	}
	found := false
	for _, n := range res.Notes() {
		found = found || strings.HasPrefix(n, "short windows for their latency, with no warm-up (the report's warning): baseline run a (its RPS undercounts by up to about 10.0 %)")
	}
	if !found {
		t.Errorf("notes %q: no short-window note", res.Notes())
	}
}

// TestBootstrapOneRun: one run per side is compared by the interval
// bootstrap: a 20 % slower candidate is significant with +20 % in the
// CI, and a run against itself is not; its notes say first what the
// bootstrap cannot tell.
func TestBootstrapOneRun(t *testing.T) {
	res, err := Compare([]Run{intervalRun("a", 10, 1000)}, []Run{intervalRun("b", 10, 1200)}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Notes(); len(n) == 0 || n[0] != OneRunNote {
		t.Errorf("one-run notes %q, want %q first", n, OneRunNote)
	}
	m := metric(t, res, "p50")
	if res.Method != Bootstrap || !m.Significant || m.DeltaPct < 18 || m.DeltaPct > 22 || m.CILoPct > m.DeltaPct || m.CIHiPct < m.DeltaPct || m.CILoPct < 15 || m.CIHiPct > 25 {
		t.Errorf("%s: %+v", res.Method, m)
	}
	res, err = Compare([]Run{intervalRun("a", 10, 1000)}, []Run{intervalRun("b", 10, 1000)}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Metrics {
		if m.Significant {
			t.Errorf("same run: %+v", m)
		}
	}
}

// TestBootstrapTooFewIntervals: a one-run-per-side comparison whose run
// has fewer than MinIntervals intervals is refused, naming the run: with
// one interval each, every resample is the run itself, so the CI would
// be the point estimate and a noise difference "significant".
func TestBootstrapTooFewIntervals(t *testing.T) {
	for _, n := range []int{1, 2, MinIntervals - 1} {
		_, err := Compare([]Run{intervalRun("a", 10, 1000)}, []Run{intervalRun("b", n, 1200)}, false, 1)
		if !errors.Is(err, ErrTooFewIntervals) || !strings.Contains(err.Error(), fmt.Sprintf("run b has %d", n)) {
			t.Errorf("Compare(10 intervals, %d intervals) = %v, want ErrTooFewIntervals naming run b", n, err)
		}
	}
	if _, err := Compare([]Run{intervalRun("a", MinIntervals, 1000)}, []Run{intervalRun("b", MinIntervals, 1200)}, false, 1); err != nil {
		t.Errorf("Compare(%d intervals each) = %v, want a comparison", MinIntervals, err)
	}
}

// TestPlanDifferences: the candidate's first run is compared with the
// baseline's and each run with its side's first; runs of one plan give no
// difference and no note, a run with another rate or URL gives both, and
// the notes list every differing setting of a pair on one line.
func TestPlanDifferences(t *testing.T) {
	base := plan.Plan{URL: "https://a.example/", Connections: 10, Duration: time.Second}
	base.SetDefaults()
	a, b := runsOf(100, 101, 102, 103), runsOf(200, 201, 202, 203)
	for i := range a {
		a[i].Report.RunID, b[i].Report.RunID = fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		a[i].Plan, b[i].Plan = base, base
	}
	res, err := Compare(a, b, false, 1)
	if err != nil || len(res.PlanDifferences) != 0 || len(res.PlanNotes()) != 0 {
		t.Fatalf("one plan on both sides: %v, %+v", err, res.PlanDifferences)
	}
	b[0].Plan.URL = "https://b.example/"
	for i := 1; i < len(b); i++ {
		b[i].Plan.URL = "https://b.example/"
	}
	a[2].Plan.Connections = 20
	a[2].Plan.Warmup = 2 * time.Second
	if res, err = Compare(a, b, false, 1); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`plans differ: candidate run b0 against baseline run a0: URL "https://a.example/" → "https://b.example/"`,
		`plans differ: baseline run a2 against baseline run a0: Connections 10 → 20; Warmup 0s → 2s`,
	}
	if got := res.PlanNotes(); !slices.Equal(got, want) {
		t.Fatalf("PlanNotes =\n%q\nwant\n%q", got, want)
	}
	if n := res.Notes(); len(n) != 2 || n[1] != want[1] {
		t.Errorf("Notes = %q: want the plan notes in them", n)
	}
	// Equal stored plans of different hashes (another body or CA) under one
	// coordinator build are a difference; under two builds, or without a
	// plan (coordctl ab's runs), nothing is said.
	for i := range b {
		b[i].Plan = base
	}
	a[2].Plan = base
	prov := func(hash, commit string) *report.Provenance {
		return &report.Provenance{PlanHash: hash, CoordinatorVersion: "v1", CoordinatorCommit: commit}
	}
	for i := range a {
		a[i].Report.Provenance, b[i].Report.Provenance = prov("sha256:aa", "c1"), prov("sha256:aa", "c1")
	}
	b[0].Report.Provenance = prov("sha256:bb", "c1")
	b[1].Report.Provenance = prov("sha256:cc", "c2")
	if res, err = Compare(a, b, false, 1); err != nil {
		t.Fatal(err)
	}
	want = []string{
		`plans differ: candidate run b0 against baseline run a0: Body or TLS.CAPEM (not stored; the plan hash) sha256:aa → sha256:bb`,
		`plans differ: candidate run b2 against candidate run b0: Body or TLS.CAPEM (not stored; the plan hash) sha256:bb → sha256:aa`,
		`plans differ: candidate run b3 against candidate run b0: Body or TLS.CAPEM (not stored; the plan hash) sha256:bb → sha256:aa`,
	}
	if got := res.PlanNotes(); !slices.Equal(got, want) {
		t.Fatalf("PlanNotes =\n%q\nwant\n%q", got, want)
	}
	for i := range a {
		a[i].Plan, b[i].Plan = plan.Plan{}, plan.Plan{}
	}
	if res, err = Compare(a, b, false, 1); err != nil || len(res.PlanDifferences) != 0 {
		t.Fatalf("runs without plans: %v, %+v", err, res.PlanDifferences)
	}
}

package report_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// runAndReport decodes res and builds its report.
func runAndReport(t testing.TB, res *pb.RunResult) (*report.Run, *report.Report) {
	t.Helper()
	run, err := wire.RunFromProto(res)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(run)
	if err != nil {
		t.Fatal(err)
	}
	return run, rep
}

// dataOf builds run's report and its HTML data block.
func dataOf(t *testing.T, run *report.Run) *report.HTMLData {
	t.Helper()
	rep, err := report.Build(run)
	if err != nil {
		t.Fatal(err)
	}
	d, err := report.BuildHTMLData(run, rep)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// htmlData returns the indented JSON of res's HTML data block.
func htmlData(t *testing.T, res *pb.RunResult) []byte {
	t.Helper()
	d, err := report.BuildHTMLData(runAndReport(t, res))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestGoldenHTMLData compares the HTML page's data block of a closed- and
// an open-loop run with testdata/report.html.json and
// report_open.html.json; -update rewrites them.
func TestGoldenHTMLData(t *testing.T) {
	golden(t, "report.html.json", htmlData(t, result(t)))
	golden(t, "report_open.html.json", htmlData(t, openResult(t, 40)))
}

// TestWriteHTMLEmbedsData checks that the page holds the data block as
// BuildHTMLData computes it, and the inlined uPlot, and loads nothing by
// address.
func TestWriteHTMLEmbedsData(t *testing.T) {
	run, rep := runAndReport(t, openResult(t, 40))
	var page bytes.Buffer
	if err := report.WriteHTML(&page, run, rep, report.HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	const open = `<script type="application/json" id="phalanx-data">`
	i := strings.Index(s, open)
	if i < 0 {
		t.Fatalf("page has no data block %q", open)
	}
	j := strings.Index(s[i:], "</script>")
	var got report.HTMLData
	if err := json.Unmarshal([]byte(s[i+len(open):i+j]), &got); err != nil {
		t.Fatalf("data block: %v", err)
	}
	want, err := report.BuildHTMLData(run, rep)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != report.HTMLFormat || got.View != "run" || got.Run.RunID != rep.RunID || got.Intervals.Latency != want.Intervals.Latency {
		t.Errorf("data block = format %q view %q run %q, want %q run %q and the interval histograms of BuildHTMLData", got.Format, got.View, got.Run.RunID, report.HTMLFormat, rep.RunID)
	}
	if !strings.Contains(s, "uPlot") || !strings.Contains(s, "<title>Phalanx run "+rep.RunID+"</title>") {
		t.Error("page lacks the inlined uPlot or its title")
	}
	for _, ref := range []string{"src=", "href=", "@import", "url("} {
		if strings.Contains(s, ref) {
			t.Errorf("page holds %q: it may load something by address", ref)
		}
	}
}

// samples returns n latencies (µs) spread over four decades.
func samples(rng *rand.Rand, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 1 + int64(rng.ExpFloat64()*float64(int64(1)<<rng.IntN(24)))
	}
	return out
}

// TestHTMLIntervalsGeometry checks the page's interval histograms against
// hdrhistogram-go's own 2-significant-digit histogram of the same samples:
// the same buckets (lowest values) with the same counts, for random
// intervals.
func TestHTMLIntervalsGeometry(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	res := result(t)
	var want []*hdrhistogram.Histogram
	res.Timeline = nil
	for i := range 20 {
		h, coarse := hist.New(), hdrhistogram.New(1, hist.HighestUs, 2)
		for _, v := range samples(rng, 1+rng.IntN(3000)) {
			h.RecordMicros(v)
			if err := coarse.RecordValue(v); err != nil {
				t.Fatal(err)
			}
		}
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res.Timeline = append(res.Timeline, &pb.TimelinePoint{Index: int32(i), Latency: b})
		want = append(want, coarse)
	}
	d, err := report.BuildHTMLData(runAndReport(t, res))
	if err != nil {
		t.Fatal(err)
	}
	got, err := report.DecodeHTMLIntervals(d.Intervals.Latency)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("DecodeHTMLIntervals = %d intervals, want %d", len(got), len(want))
	}
	for i, coarse := range want {
		var pairs []int64
		for _, bar := range coarse.Distribution() {
			if bar.Count > 0 {
				pairs = append(pairs, bar.From, bar.Count)
			}
		}
		if !equal(got[i], pairs) {
			t.Errorf("interval %d: page buckets %v, want hdrhistogram-go's 2-digit %v", i, head(got[i]), head(pairs))
		}
	}
}

// TestHTMLTimelinePercentiles checks that the page's interval percentiles,
// read from the encodings, equal Build's (and p99.9 hdrhistogram-go's).
func TestHTMLTimelinePercentiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	res := result(t)
	res.Timeline = nil
	var hs []*hist.Histogram
	for i := range 30 {
		h := hist.New()
		for _, v := range samples(rng, 1+rng.IntN(2000)) {
			h.RecordMicros(v)
		}
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res.Timeline = append(res.Timeline, &pb.TimelinePoint{Index: int32(i), Latency: b})
		hs = append(hs, h)
	}
	run, rep := runAndReport(t, res)
	d, err := report.BuildHTMLData(run, rep)
	if err != nil {
		t.Fatal(err)
	}
	tl := d.Timeline
	for i, p := range rep.Timeline {
		got := []int64{tl.P50Us[i], tl.P90Us[i], tl.P99Us[i], tl.P999Us[i], tl.MaxUs[i]}
		want := []int64{p.P50Us, p.P90Us, p.P99Us, hs[i].ValueAtPercentile(99.9), p.MaxUs}
		if !equal(got, want) {
			t.Errorf("interval %d: p50, p90, p99, p99.9, max = %v, want %v", i, got, want)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(a []int64) []int64 { return a[:min(len(a), 12)] }

// TestHTMLSLOs checks which thresholds the page draws as SLO lines: the
// whole window's percentiles of a latency histogram, not a stage's, not
// max, rps or errors.
func TestHTMLSLOs(t *testing.T) {
	res := result(t)
	run, err := wire.RunFromProto(res)
	if err != nil {
		t.Fatal(err)
	}
	v := 900.0
	for _, th := range []string{"p99<3ms", "stage1.p99<3ms", "rps>100", "errors<1%", "max<1s", "ttfb.p99.9<=10ms"} {
		run.Verdict.Thresholds = append(run.Verdict.Thresholds, report.ThresholdResult{Threshold: th, Value: &v, Unit: "us", Pass: th != "p99<3ms"})
	}
	d := dataOf(t, run)
	want := []report.HTMLSLO{{Threshold: "p99<3ms", Kind: "latency", Percentile: 99, LimitUs: 3000}, {Threshold: "ttfb.p99.9<=10ms", Kind: "ttfb", Percentile: 99.9, LimitUs: 10000, Pass: true}}
	if len(d.SLOs) != len(want) || d.SLOs[0] != want[0] || d.SLOs[1] != want[1] {
		t.Errorf("SLOs = %+v, want %+v", d.SLOs, want)
	}
}

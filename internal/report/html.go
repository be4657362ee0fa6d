package report

import (
	"bytes"

	"embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"text/template"

	"github.com/klauspost/compress/zlib"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/threshold"
)

// The page's assets: uPlot (html/vendor, its licence and version in
// html/README.md), the page's script and style. They are embedded in the
// binary so that the HTML file opens offline, with no network request.
//
//go:embed html/page.html html/app.js html/app.css html/vendor/uPlot.iife.min.js html/vendor/uPlot.min.css
var htmlAssets embed.FS

// HTMLFormat names the data block's layout (HTMLData); a change that a
// reader of an older page would misread gets a new number.
const HTMLFormat = "phalanx-report-html/1"

// Interval histograms in the page (HTMLData.Intervals) use a coarser
// HdrHistogram geometry than the run's (hist.SigFigs): lowest 1 µs, 2
// significant digits, so sub-buckets of 256 (half 128). A value is then
// exact below 256 µs and within 1/128 (0.78 %) above; every bucket of the
// run's geometry lies inside one bucket of this one, so the counts are
// exact and merging is adding them. The whole window's histograms
// (HTMLData.Spectra) keep the run's geometry (3 digits, 0.1 %).
const (
	htmlSubBucketHalfMagnitude = 7
	htmlSubBucketHalfCount     = 1 << htmlSubBucketHalfMagnitude
	htmlSubBucketMask          = 2*htmlSubBucketHalfCount - 1
	// runSubBucketHalfMagnitude is hist's geometry (3 digits: half 1024).
	runSubBucketHalfMagnitude = 10
)

// HTMLData is the page's data block: a JSON object in a <script
// type="application/json" id="phalanx-data"> element that the page's
// script reads and charts. Its field names are part of the interface (a
// page's data can be read back from the file: see internal/report/html/
// README.md). View selects the page's layout: "run" (one run, Run and
// the fields after Compare), "search" (Search only) or "compare" (Compare
// only).
type HTMLData struct {
	Format string `json:"format"`
	View   string `json:"view"`
	// Run is the run's report without its timeline (Timeline holds it);
	// nil in the search and compare views.
	Run *Report `json:"run,omitempty"`
	// Search is the capacity search of the "search" view (nil otherwise):
	// its knee, steps and throughput-latency curve.
	Search *Search `json:"search,omitempty"`
	// Compare is the A/B comparison of the "compare" view (nil
	// otherwise): its statistics table and both sides to overlay.
	Compare *HTMLCompare `json:"compare,omitempty"`
	// Warnings are the report's (Report.Warnings): what a reader must know
	// before trusting its figures.
	Warnings []string `json:"warnings,omitempty"`
	// SLOs are the run's whole-window thresholds on a latency percentile
	// (Run.thresholds holds every threshold's outcome), drawn on the
	// spectra as SLO lines.
	SLOs []HTMLSLO `json:"slos,omitempty"`
	// Timeline is the run's timeline as columns, one entry per interval.
	Timeline HTMLTimeline `json:"timeline"`
	// Spectra holds the whole window's histograms for the percentile
	// spectra, in the run's geometry (3 significant digits).
	Spectra HTMLSpectra `json:"spectra"`
	// Intervals holds each interval's histograms in the page's coarser
	// geometry (2 significant digits), for the spectrum of a selected
	// range.
	Intervals HTMLIntervals `json:"intervals"`
}

// HTMLSLO is a whole-window threshold on a percentile of a latency
// histogram (coordctl run --threshold p99<3ms, ttfb.p99.9<10ms): Kind names
// the histogram (hist.Kind's names: latency, service, lateness, connect,
// tls_full, tls_resumed, ttfb), Percentile is 0-100, LimitUs the bound in
// µs, and Pass its outcome.
type HTMLSLO struct {
	Threshold  string  `json:"threshold"`
	Kind       string  `json:"kind"`
	Percentile float64 `json:"percentile"`
	LimitUs    float64 `json:"limit_us"`
	Pass       bool    `json:"pass"`
}

// sloOf returns the SLOs among rep's thresholds (see HTMLSLO).
func sloOf(rep *Report) []HTMLSLO {
	var out []HTMLSLO
	for _, r := range rep.Thresholds {
		t, err := threshold.Parse(r.Threshold)
		if err != nil || t.Stage >= 0 || t.Metric != threshold.Percentile {
			continue // the coordinator parsed it; a stage's or another metric's has no line
		}
		out = append(out, HTMLSLO{Threshold: r.Threshold, Kind: t.Kind.String(), Percentile: t.Percentile, LimitUs: t.Limit, Pass: r.Pass})
	}
	return out
}

// HTMLTimeline is a run's timeline as columns (index i of each is
// interval i). Latency percentiles are µs, read from the interval's merged
// latency histogram (0 when it holds none); CPUBusy has one series per
// agent, in the order of Run.AgentRows.
type HTMLTimeline struct {
	StartS            []float64 `json:"start_s"`
	DurationS         []float64 `json:"duration_s"`
	Requests          []int64   `json:"requests"`
	RPS               []float64 `json:"rps"`
	Errors            []int64   `json:"errors"`
	Missed            []int64   `json:"missed"`
	TargetRPS         []float64 `json:"target_rps"`
	TargetConnections []float64 `json:"target_connections"`
	// Connections is the number of connections opened in each interval
	// (the count behind a range's connect and TLS spectra).
	Connections []int64     `json:"connections"`
	Agents      []int32     `json:"agents"`
	Partial     []bool      `json:"partial"`
	P50Us       []int64     `json:"p50_us"`
	P90Us       []int64     `json:"p90_us"`
	P99Us       []int64     `json:"p99_us"`
	P999Us      []int64     `json:"p999_us"`
	MaxUs       []int64     `json:"max_us"`
	CPUBusy     [][]float64 `json:"cpu_busy"`
	// AgentRequests has, when the result kept the agents' own intervals
	// (coordctl run --hlog or --csv-per-agent), one series per agent of
	// its responses in each interval (0 where it sent none); absent
	// otherwise.
	AgentRequests [][]int64 `json:"agent_requests,omitempty"`
}

// HTMLSpectra holds whole-window histograms as flat [value, count, value,
// count, ...] lists of their non-empty buckets in increasing order, each
// value the lowest of its bucket in the run's geometry (SigFigs names it:
// 3). A histogram the run does not have (service time and lateness in
// closed loop, phases in a report rebuilt from intervals) is null.
type HTMLSpectra struct {
	SigFigs    int     `json:"significant_digits"`
	Latency    []int64 `json:"latency"`
	Service    []int64 `json:"service_time"`
	Lateness   []int64 `json:"lateness"`
	Connect    []int64 `json:"connect"`
	TLSFull    []int64 `json:"tls_full"`
	TLSResumed []int64 `json:"tls_resumed"`
	TTFB       []int64 `json:"ttfb"`
}

// HTMLIntervals holds every interval's latency histogram (in open loop its
// service time and send lateness, and the phases the result keeps per
// interval) in the page's geometry: bucket index i (HdrHistogram's
// counts index for lowest 1, sub-bucket half count 128) has lowest value i
// below 256, else ((i mod 128) + 128) << (i/128 - 1). Each column is
// base64 (standard) of zlib (RFC 1950) of, per interval in timeline order,
// uvarint(number of non-empty buckets) then per bucket uvarint(index minus
// the previous one's, from 0) and uvarint(count); the page inflates it
// with the browser's DecompressionStream.
type HTMLIntervals struct {
	SigFigs  int    `json:"significant_digits"`
	Count    int    `json:"count"`
	Latency  string `json:"latency"`
	Service  string `json:"service_time,omitempty"`
	Lateness string `json:"lateness,omitempty"`
	// Connect, TLSFull, TLSResumed and TTFB are the phases' columns, each
	// present when some interval of the result holds that phase (a result
	// written before TimelinePoint carried phases has none).
	Connect    string `json:"connect,omitempty"`
	TLSFull    string `json:"tls_full,omitempty"`
	TLSResumed string `json:"tls_resumed,omitempty"`
	TTFB       string `json:"ttfb,omitempty"`
}

// BuildHTMLData computes the page's data block of a run and its report
// (Build's): columns from the run's intervals, the percentiles of each
// from its histogram's encoding (the interval's LatencyV2, read without
// expanding it to a full histogram, so that a day of 1 s intervals stays
// small), and the page's interval histograms. Errors: a corrupt interval
// histogram, named with its index.
func BuildHTMLData(run *Run, rep *Report) (*HTMLData, error) {
	summary := *rep
	summary.Timeline = nil
	d := &HTMLData{Format: HTMLFormat, View: "run", Run: &summary, Warnings: rep.Warnings(), SLOs: sloOf(rep)}
	n := len(run.Timeline)
	t := &d.Timeline
	t.StartS, t.DurationS, t.RPS = make([]float64, n), make([]float64, n), make([]float64, n)
	t.TargetRPS, t.TargetConnections = make([]float64, n), make([]float64, n)
	t.Requests, t.Errors, t.Missed, t.Connections = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	t.Agents, t.Partial = make([]int32, n), make([]bool, n)
	t.P50Us, t.P90Us, t.P99Us, t.P999Us, t.MaxUs = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	agents := len(rep.AgentRows)
	t.CPUBusy = make([][]float64, agents)
	for a := range t.CPUBusy {
		t.CPUBusy[a] = make([]float64, n)
	}
	if run.HasAgentIntervals() {
		pos := make(map[int32]int, n)
		for i, pt := range run.Timeline {
			pos[pt.Index] = i
		}
		t.AgentRequests = make([][]int64, len(run.Agents))
		for a, ag := range run.Agents {
			t.AgentRequests[a] = make([]int64, n)
			for _, iv := range ag.Intervals {
				if i, ok := pos[iv.Index]; ok {
					t.AgentRequests[a][i] += iv.Requests
				}
			}
		}
	}
	var dec hist.Decoder
	var s hist.Sparse
	// The page's interval columns: latency always; service time and send
	// lateness in open loop; each phase when some interval holds it.
	cols := []struct {
		k   hist.Kind
		out *string
	}{{hist.Latency, &d.Intervals.Latency}, {hist.Connect, &d.Intervals.Connect}, {hist.TLSFull, &d.Intervals.TLSFull},
		{hist.TLSResumed, &d.Intervals.TLSResumed}, {hist.TTFB, &d.Intervals.TTFB}}
	open := rep.Mode == "open"
	if open {
		cols = append(cols, struct {
			k   hist.Kind
			out *string
		}{hist.Service, &d.Intervals.Service}, struct {
			k   hist.Kind
			out *string
		}{hist.Lateness, &d.Intervals.Lateness})
	}
	var writers [hist.NumKinds]*intervalWriter
	for _, c := range cols {
		if c.k == hist.Latency || hasKind(run.Timeline, c.k) {
			writers[c.k] = newIntervalWriter()
		}
	}
	for i, pt := range run.Timeline {
		t.StartS[i], t.DurationS[i] = pt.Start.Seconds(), pt.Length.Seconds()
		t.Requests[i], t.Errors[i], t.Missed[i], t.Connections[i] = pt.Requests, pt.Errors, pt.Missed, pt.Connections
		t.TargetRPS[i], t.TargetConnections[i] = pt.TargetRPS, pt.TargetConnections
		t.Agents[i], t.Partial[i] = pt.Agents, pt.Partial
		if t.DurationS[i] > 0 {
			t.RPS[i] = float64(pt.Requests) / t.DurationS[i]
		}
		for a := 0; a < agents && a < len(pt.CPUBusy); a++ {
			t.CPUBusy[a][i] = pt.CPUBusy[a]
		}
		for k, w := range writers {
			if w == nil {
				continue
			}
			if err := pt.Sparse(&dec, hist.Kind(k), &s); err != nil {
				return nil, fmt.Errorf("html report: interval %d %s: %w", pt.Index, hist.Kind(k), err)
			}
			if hist.Kind(k) == hist.Latency && s.Total > 0 {
				q := sparsePercentiles(&s, runSubBucketHalfMagnitude, 50, 90, 99, 99.9, 100)
				t.P50Us[i], t.P90Us[i], t.P99Us[i], t.P999Us[i], t.MaxUs[i] = q[0], q[1], q[2], q[3], q[4]
			}
			w.add(&s)
		}
	}
	d.Intervals.SigFigs, d.Intervals.Count = 2, n
	for _, c := range cols {
		if w := writers[c.k]; w != nil {
			var err error
			if *c.out, err = w.finish(); err != nil {
				return nil, err
			}
		}
	}
	d.Spectra.SigFigs = hist.SigFigs
	if hs := run.Histograms; hs != nil {
		kinds := []struct {
			h   *hist.Histogram
			out *[]int64
		}{{hs.Latency, &d.Spectra.Latency}, {hs.Connect, &d.Spectra.Connect}, {hs.TLSFull, &d.Spectra.TLSFull},
			{hs.TLSResumed, &d.Spectra.TLSResumed}, {hs.TTFB, &d.Spectra.TTFB}}
		if open {
			kinds = append(kinds, struct {
				h   *hist.Histogram
				out *[]int64
			}{hs.Service, &d.Spectra.Service}, struct {
				h   *hist.Histogram
				out *[]int64
			}{hs.Lateness, &d.Spectra.Lateness})
		}
		for _, k := range kinds {
			if k.h == nil {
				continue
			}
			if err := sparseOf(&dec, k.h, &s); err != nil {
				return nil, fmt.Errorf("html report: %w", err)
			}
			pairs := make([]int64, 0, 2*len(s.Values))
			for j, v := range s.Values {
				pairs = append(pairs, v, s.Counts[j])
			}
			*k.out = pairs
		}
	}
	return d, nil
}

// sparseOf decodes h into s (nil: empty).
func sparseOf(dec *hist.Decoder, h *hist.Histogram, s *hist.Sparse) error {
	if h == nil {
		return decodeSparse(dec, nil, s)
	}
	return dec.Decode(h.EncodeV2(), s)
}

// hasKind reports whether some interval of tl holds a histogram of kind k.
func hasKind(tl []Interval, k hist.Kind) bool {
	for i := range tl {
		if len(tl[i].V2[k]) > 0 {
			return true
		}
	}
	return false
}

// highestEquivalent returns the highest value of the bucket whose lowest
// value is v, in a geometry of lowest 1 and sub-bucket half count
// 2^halfMagnitude (HdrHistogram's highestEquivalentValue).
func highestEquivalent(v int64, halfMagnitude int) int64 {
	shift := bits.Len64(uint64(v)) - 1 - halfMagnitude
	if shift <= 0 {
		return v
	}
	return v + 1<<shift - 1
}

// sparsePercentiles returns the values at percentiles ps (0-100] of s
// (non-empty), as hdrhistogram-go's ValueAtPercentile computes them: the
// highest equivalent value of the first bucket whose cumulative count
// reaches max(1, round(p/100 × total)).
func sparsePercentiles(s *hist.Sparse, halfMagnitude int, ps ...float64) []int64 {
	out := make([]int64, len(ps))
	for k, p := range ps {
		rank := int64(1)
		if r := p/100*float64(s.Total) + 0.5; r >= float64(s.Total) {
			rank = s.Total
		} else if r >= 1 {
			rank = int64(r)
		}
		var cum int64
		for j, c := range s.Counts {
			cum += c
			if cum >= rank {
				out[k] = highestEquivalent(s.Values[j], halfMagnitude)
				break
			}
		}
	}
	return out
}

// htmlIndex returns the page geometry's bucket index of value v (≥ 1),
// HdrHistogram's countsIndex for lowest 1 and half count 128.
func htmlIndex(v int64) int64 {
	bucket := int64(bits.Len64(uint64(v|htmlSubBucketMask))) - 1 - htmlSubBucketHalfMagnitude
	sub := v >> bucket
	return (bucket+1)<<htmlSubBucketHalfMagnitude + (sub - htmlSubBucketHalfCount)
}

// intervalWriter writes one HTMLIntervals column.
type intervalWriter struct {
	buf bytes.Buffer
	zw  *zlib.Writer
	tmp []byte
	idx []int64
	cnt []int64
}

// intervalLevel is the interval columns' zlib level: klauspost/compress's
// level 4 takes under half the time of the standard library's default on a
// day of intervals for a column a few % larger.
const intervalLevel = 4

func newIntervalWriter() *intervalWriter {
	w := &intervalWriter{}
	w.zw, _ = zlib.NewWriterLevel(&w.buf, intervalLevel) // a valid level: no error
	return w
}

// add appends one interval: s's buckets re-bucketed to the page geometry.
func (w *intervalWriter) add(s *hist.Sparse) {
	w.idx, w.cnt = w.idx[:0], w.cnt[:0]
	for j, v := range s.Values {
		i := htmlIndex(v)
		if n := len(w.idx); n > 0 && w.idx[n-1] == i {
			w.cnt[n-1] += s.Counts[j]
			continue
		}
		w.idx, w.cnt = append(w.idx, i), append(w.cnt, s.Counts[j])
	}
	w.tmp = binary.AppendUvarint(w.tmp[:0], uint64(len(w.idx)))
	prev := int64(0)
	for j, i := range w.idx {
		w.tmp = binary.AppendUvarint(w.tmp, uint64(i-prev))
		w.tmp = binary.AppendUvarint(w.tmp, uint64(w.cnt[j]))
		prev = i
	}
	_, _ = w.zw.Write(w.tmp) // a bytes.Buffer does not fail
}

func (w *intervalWriter) finish() (string, error) {
	if err := w.zw.Close(); err != nil {
		return "", fmt.Errorf("html report: compress interval histograms: %w", err)
	}
	return base64.StdEncoding.EncodeToString(w.buf.Bytes()), nil
}

// DecodeHTMLIntervals reads one HTMLIntervals column back: per interval,
// the (lowest value, count) pairs of its non-empty buckets in the page
// geometry. It is the page script's decoding, for tests and tools.
// Errors: input that is not such a column.
func DecodeHTMLIntervals(col string) ([][]int64, error) {
	raw, err := base64.StdEncoding.DecodeString(col)
	if err != nil {
		return nil, fmt.Errorf("html intervals: %w", err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("html intervals: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("html intervals: %w", err)
	}
	next := func() (int64, error) {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, fmt.Errorf("html intervals: bad varint")
		}
		b = b[k:]
		return int64(v), nil
	}
	var out [][]int64
	for len(b) > 0 {
		n, err := next()
		if err != nil {
			return nil, err
		}
		pairs := []int64{}
		idx := int64(0)
		for range n {
			delta, err := next()
			if err != nil {
				return nil, err
			}
			c, err := next()
			if err != nil {
				return nil, err
			}
			idx += delta
			pairs = append(pairs, hist.IndexLowest(idx, htmlSubBucketHalfMagnitude), c)
		}
		out = append(out, pairs)
	}
	return out, nil
}

// HTMLOptions are the page's settings.
type HTMLOptions struct {
	// Title is the page's title; "" for "Phalanx run RUN_ID".
	Title string
}

// WriteHTML writes the run's report as one self-contained HTML page
// (uPlot and the page's script inlined, the data in a JSON block,
// HTMLData): summary, plan, timeline, percentile spectra (recomputed for a
// range selected in the timeline) and the agents. It opens offline and
// makes no network request. Errors: BuildHTMLData's, and w's.
func WriteHTML(w io.Writer, run *Run, rep *Report, opts HTMLOptions) error {
	d, err := BuildHTMLData(run, rep)
	if err != nil {
		return err
	}
	return writeHTMLPage(w, d, opts)
}

// WriteSearchHTML writes a capacity search (coordctl search) as one
// self-contained HTML page, the data block's "search" view: the answer
// (the knee with its confidence interval, or why there is none), the
// throughput-latency curve with each step's verdict and the knee marked,
// and the table of steps. Errors: w's.
func WriteSearchHTML(w io.Writer, s *Search, opts HTMLOptions) error {
	return writeHTMLPage(w, &HTMLData{Format: HTMLFormat, View: "search", Search: s}, opts)
}

func writeHTMLPage(w io.Writer, d *HTMLData, opts HTMLOptions) error {
	data, err := json.Marshal(d) // escapes <, > and &: the block cannot end the script element
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	read := func(name string) string {
		b, _ := htmlAssets.ReadFile("html/" + name) // embedded: present
		return string(b)
	}
	title := opts.Title
	switch {
	case title != "":
	case d.Search != nil:
		title = "Phalanx capacity search " + d.Search.SearchID
	default:
		title = "Phalanx run " + d.Run.RunID
	}
	// The page around a marker where the data goes, written in three
	// parts: the data block (tens of MB for a day of intervals) is not
	// copied into the template's output.
	const marker = "\x00phalanx-data\x00"
	var b bytes.Buffer
	page := template.Must(template.New("page").Parse(read("page.html")))
	if err := page.Execute(&b, map[string]string{
		"Title":     template.HTMLEscapeString(title),
		"UPlotCSS":  read("vendor/uPlot.min.css"),
		"CSS":       read("app.css"),
		"UPlotJS":   read("vendor/uPlot.iife.min.js"),
		"JS":        read("app.js"),
		"Data":      marker,
		"Generator": "phalanx " + strings.TrimPrefix(HTMLFormat, "phalanx-"),
	}); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	before, after, _ := bytes.Cut(b.Bytes(), []byte(marker)) // the template holds it once
	for _, part := range [][]byte{before, data, after} {
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	return nil
}

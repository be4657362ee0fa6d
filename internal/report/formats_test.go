package report_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// agentsResult is result with each agent's intervals kept (latency
// histograms in the agents' uncompressed V2, as they send them), the
// timeline points their exact merge, and provenance for the run and its
// agents.
func agentsResult(t *testing.T) *pb.RunResult {
	t.Helper()
	res := result(t)
	res.PlanHash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	res.CoordinatorVersion, res.CoordinatorCommit = "v0.9.0", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	// Agent a's interval k holds 10*(k+1)+a samples from base to base+n.
	for k, pt := range res.Timeline {
		merged := hist.New()
		var requests int64
		for a, ar := range res.Agents {
			h := hist.New()
			n := int64(10*(k+1) + a)
			for v := range n {
				h.RecordMicros(int64(100*(a+1)) + 37*v)
			}
			if err := merged.Merge(h); err != nil {
				t.Fatal(err)
			}
			requests += n
			ar.Intervals = append(ar.Intervals, &pb.AgentInterval{
				Index: int32(k), Start: durationpb.New(time.Duration(k)*time.Second + time.Duration(a)*time.Millisecond),
				Length: durationpb.New(time.Second), Requests: n, Errors: int64(a), Latency: h.EncodeV2(),
			})
		}
		b, err := merged.Encode()
		if err != nil {
			t.Fatal(err)
		}
		pt.Latency, pt.Requests = b, requests
	}
	res.Agents[0].CpuList = "0-1"
	res.Agents[0].ClockOffset = durationpb.New(-12 * time.Microsecond)
	res.Agents[0].Provenance = &pb.Provenance{
		Hostname: "load-1", Kernel: "Linux 6.1.0-18-amd64", CpuModel: "AMD EPYC 7763 64-Core Processor", CpuCount: 16,
		GoVersion: "go1.26.8", OsArch: "linux/amd64", TlsLibrary: "crypto/tls", TlsLibraryVersion: "go1.26.8",
		AgentVersion: "v0.9.0", AgentCommit: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
	}
	// agent-2 sent no provenance (an older agent).
	return res
}

func agentsRun(t *testing.T) *report.Run {
	t.Helper()
	r, err := wire.RunFromProto(agentsResult(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGoldenHgrm compares the latency .hgrm with testdata/latency.hgrm
// (-update rewrites it) and checks it against the histogram: each line's
// value is the histogram's value at the line's percentile, its count the
// samples up to that value, and the footer its mean, max and count.
func TestGoldenHgrm(t *testing.T) {
	r := agentsRun(t)
	h := r.Histograms.Latency
	var b bytes.Buffer
	if err := report.WriteHgrm(&b, h, report.HgrmTicksPerHalfDistance, report.HgrmScale); err != nil {
		t.Fatal(err)
	}
	golden(t, "latency.hgrm", b.Bytes())
	rows := parseHgrm(t, b.String())
	if len(rows) < 20 || rows[len(rows)-1].pct != 1 || rows[len(rows)-1].count != h.Count() {
		t.Fatalf("%d rows, last %+v; want >= 20 rows ending at 1.0 with %d samples", len(rows), rows[len(rows)-1], h.Count())
	}
	for _, row := range rows {
		if want := float64(h.ValueAtPercentile(100*row.pct)) / 1000; row.value != want {
			t.Errorf("line at %.12f: value %.3f ms, histogram's %.3f ms", row.pct, row.value, want)
		}
	}
	want := []string{"#[Mean    =        0.500, StdDeviation   =        0.289]", "#[Max     =        1.000, Total count    =         1000]", "#[Buckets =           27, SubBuckets     =         2048]"}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if got := lines[len(lines)-3:]; !slices.Equal(got, want) {
		t.Errorf("footer\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHgrmEmpty: an empty histogram has the header and a zero footer, as
// Java prints it.
func TestHgrmEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := report.WriteHgrm(&b, hist.New(), 5, 1000); err != nil {
		t.Fatal(err)
	}
	want := "       Value     Percentile TotalCount 1/(1-Percentile)\n\n" +
		"#[Mean    =        0.000, StdDeviation   =        0.000]\n" +
		"#[Max     =        0.000, Total count    =            0]\n" +
		"#[Buckets =           27, SubBuckets     =         2048]\n"
	if b.String() != want {
		t.Errorf("empty .hgrm:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestHgrmFiles names the files of a closed-loop and an open-loop run.
func TestHgrmFiles(t *testing.T) {
	names := func(r *report.Run) []string {
		var out []string
		for _, f := range report.HgrmFiles(r) {
			out = append(out, f.Name)
		}
		return out
	}
	if got, want := names(agentsRun(t)), []string{"latency", "connect", "tls_full", "tls_resumed", "ttfb"}; !slices.Equal(got, want) {
		t.Errorf("closed loop: %q, want %q", got, want)
	}
	open, err := wire.RunFromProto(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(open), []string{"latency", "service_time", "lateness", "connect", "tls_full", "tls_resumed", "ttfb"}; !slices.Equal(got, want) {
		t.Errorf("open loop: %q, want %q", got, want)
	}
	// A connection rate's handshake latency, as in the text and JSON.
	res := openResult(t, 40)
	res.Plan.ConnectionRate, res.Plan.RequestsPerConnection = true, 1
	hl := hist.New()
	for v := int64(1); v <= 50; v++ {
		hl.RecordMicros(1000 * v)
	}
	if res.Histograms.HandshakeLatency, err = hl.Encode(); err != nil {
		t.Fatal(err)
	}
	cps, err := wire.RunFromProto(res)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(cps), []string{"latency", "service_time", "lateness", "connect", "tls_full", "tls_resumed", "ttfb", "handshake_latency"}; !slices.Equal(got, want) {
		t.Errorf("connection rate: %q, want %q", got, want)
	}
	for _, f := range report.HgrmFiles(cps) {
		if f.Name == "handshake_latency" && (f.Histogram.Count() != 50 || f.Histogram.Max() < 49_900) {
			t.Errorf("handshake_latency.hgrm: %d samples, max %d µs; want 50, 50 ms", f.Histogram.Count(), f.Histogram.Max())
		}
	}
}

type hgrmRow struct {
	value, pct float64
	count      int64
}

func parseHgrm(t *testing.T, s string) []hgrmRow {
	t.Helper()
	var rows []hgrmRow
	for _, line := range strings.Split(s, "\n")[2:] {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		var r hgrmRow
		if err := json.Unmarshal([]byte("["+f[0]+","+f[1]+","+f[2]+"]"), &[]any{&r.value, &r.pct, &r.count}); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestGoldenHlog compares the .hlog with testdata/report.hlog (-update
// rewrites it) and reads it back with hdrhistogram-go's log reader: the
// untagged lines are the timeline's merged histograms and the tagged ones
// each agent's, exactly, at their offsets.
func TestGoldenHlog(t *testing.T) {
	r := agentsRun(t)
	var b bytes.Buffer
	if err := report.WriteHlog(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.hlog", b.Bytes())
	rd := hdrhistogram.NewHistogramLogReader(bytes.NewReader(b.Bytes()))
	var lines int
	for k, pt := range r.Timeline {
		want := []*hist.Histogram{decoded(t, pt.V2[hist.Latency])}
		tags := []string{""}
		for _, a := range r.Agents {
			want = append(want, decoded(t, a.Intervals[k].LatencyV2))
			tags = append(tags, a.Name)
		}
		for i, w := range want {
			got, err := rd.NextIntervalHistogram()
			if err != nil || got == nil {
				t.Fatalf("interval %d line %d: %v, %v", k, i, got, err)
			}
			lines++
			if got.Tag() != tags[i] {
				t.Errorf("interval %d line %d: tag %q, want %q", k, i, got.Tag(), tags[i])
			}
			if !w.Equals(got) {
				t.Errorf("interval %d %q: histogram read back differs (%d samples, want %d)", k, tags[i], got.TotalCount(), w.Count())
			}
		}
	}
	if h, err := rd.NextIntervalHistogram(); h != nil || err != nil {
		t.Errorf("after %d lines: %v, %v; want the end", lines, h, err)
	}
	if !strings.Contains(b.String(), "Tag=agent-2,1.001,1.000,") {
		t.Errorf("agent-2's interval 1 line missing (start 1.001 s, 1 s long):\n%s", b.String())
	}
}

// TestGoldenCSV compares the timeline CSV, merged and per agent, with
// testdata/timeline.csv and timeline_agents.csv (-update rewrites them),
// and checks that the per-agent rows add up to the merged row.
func TestGoldenCSV(t *testing.T) {
	r := agentsRun(t)
	var merged, agents bytes.Buffer
	if err := report.WriteCSV(&merged, r, false); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteCSV(&agents, r, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "timeline.csv", merged.Bytes())
	golden(t, "timeline_agents.csv", agents.Bytes())
	rows, err := csv.NewReader(&agents).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows[0], report.CSVHeader) || len(rows) != 1+len(r.Timeline)*(1+len(r.Agents)) {
		t.Fatalf("header %q, %d rows; want %q and %d rows", rows[0], len(rows), report.CSVHeader, 1+len(r.Timeline)*(1+len(r.Agents)))
	}
	sums := map[string]int64{}
	for _, row := range rows[1:] {
		if row[3] == report.CSVMerged {
			sums[row[0]] -= atoi(t, row[4])
		} else {
			sums[row[0]] += atoi(t, row[4])
		}
	}
	for k, d := range sums {
		if d != 0 {
			t.Errorf("interval %s: agents' requests differ from the merged row's by %d", k, d)
		}
	}
	if m, _ := csv.NewReader(&merged).ReadAll(); len(m) != 1+len(r.Timeline) {
		t.Errorf("merged CSV has %d rows, want %d", len(m), 1+len(r.Timeline))
	}
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// TestGoldenProvenance compares the text report's provenance block with
// testdata/report_provenance.txt (-update rewrites it) and checks the
// JSON's provenance: the run's, the agent that sent its own, and the one
// that sent none.
func TestGoldenProvenance(t *testing.T) {
	rep, err := wire.ReportFromResult(agentsResult(t))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_provenance.txt", text.Bytes())
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Provenance struct {
			PlanHash           string  `json:"plan_hash"`
			CoordinatorVersion string  `json:"coordinator_version"`
			StartSkewUs        float64 `json:"start_skew_us"`
			Agents             []map[string]any
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	p := got.Provenance
	if p.PlanHash != "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" || p.CoordinatorVersion != "v0.9.0" || p.StartSkewUs != 150 || len(p.Agents) != 2 {
		t.Fatalf("provenance %+v", p)
	}
	a1, a2 := p.Agents[0], p.Agents[1]
	if a1["hostname"] != "load-1" || a1["cpu_count"] != 16.0 || a1["cpu_list"] != "0-1" || a1["tls_library"] != "crypto/tls" || a1["clock_offset_us"] != -12.0 {
		t.Errorf("agent-1 provenance %v", a1)
	}
	if _, ok := a2["hostname"]; ok || a2["name"] != "agent-2" {
		t.Errorf("agent-2 sent none, has %v", a2)
	}
	// A result without any provenance renders none.
	plain, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Provenance != nil {
		t.Errorf("provenance %+v from a result with none", plain.Provenance)
	}
}

// decoded returns the V2 histogram b decoded.
func decoded(t *testing.T, b []byte) *hist.Histogram {
	t.Helper()
	h, err := hist.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

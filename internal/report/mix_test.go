package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// mixResult is result as a run of a two-request mix, each measured apart:
// /a 600 responses (590 × 200, 10 × 503) from 100 µs and a reset and a
// timeout, /b 400 × 200 from 1 ms and a refused stream; together the
// result's totals.
func mixResult(t *testing.T) *pb.RunResult {
	t.Helper()
	res := result(t)
	res.Plan.Mix = []*pb.Request{{Url: "https://127.0.0.1:8443/a", Weight: 3}, {Method: "POST", Url: "https://127.0.0.1:8443/b", Weight: 2}}
	lat := func(n int, from int64) []byte {
		h := hist.New()
		for i := range n {
			h.RecordMicros(from + int64(i))
		}
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	res.Mix = []*pb.MixResult{
		{Counters: &pb.Counters{Requests: 600, Status: map[int32]int64{200: 590, 503: 10}, Errors: map[string]int64{"reset": 1, "timeout": 1}}, Latency: lat(600, 100)},
		{Counters: &pb.Counters{Requests: 400, Status: map[int32]int64{200: 400}, Errors: map[string]int64{"refused": 1}}, Latency: lat(400, 1000)},
	}
	res.MixAgents = 2
	return res
}

// TestGoldenMix: a mix run's text report has each request apart under the
// totals (testdata/report_mix.txt; -update rewrites it).
func TestGoldenMix(t *testing.T) {
	r, err := wire.ReportFromResult(mixResult(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Mix) != 2 || r.Mix[1].Method != "POST" || r.Mix[0].Method != "GET" || r.Mix[0].Requests+r.Mix[1].Requests != r.Requests {
		t.Fatalf("mix %+v", r.Mix)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_mix.txt", b.Bytes())
}

// TestMixOverFewerAgents: a mix that misses an agent (lost before its
// end) says so, and a malformed one is refused naming the request.
func TestMixOverFewerAgents(t *testing.T) {
	res := mixResult(t)
	res.MixAgents = 1
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteText(&b, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "(over 1 of 2 agents: the others ended before their results; their requests are in the totals only)"; !strings.Contains(b.String(), want) {
		t.Errorf("no %q in\n%s", want, b.String())
	}
	res.Mix[1].Counters.Requests = 399
	res.Mix[1].Counters.Status[200] = 399
	if _, err := wire.ReportFromResult(res); err == nil || !strings.Contains(err.Error(), "mix request 1: latency histogram holds 400 samples, counters say 399 requests") {
		t.Errorf("inconsistent mix: %v", err)
	}
}

// TestMixLongURL: a URL longer than the default column widens it, so
// that every row's REQUESTS column starts where the header's does.
func TestMixLongURL(t *testing.T) {
	res := mixResult(t)
	res.Plan.Mix[1].Url = "https://127.0.0.1:8443/a/rather/long/path/for/the/second/request?with=query"
	res.Plan.Mix[1].Method = "PROPFIND"
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteText(&b, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	_, mix, _ := strings.Cut(b.String(), "Mix:\n")
	lines := strings.Split(mix, "\n")
	if len(lines) < 3 {
		t.Fatalf("mix table:\n%s", mix)
	}
	col := strings.Index(lines[0], "URL")
	end := strings.Index(lines[0], "REQUESTS") + len("REQUESTS")
	for _, l := range lines[1:3] {
		// each row: its URL starts under URL, and its request count ends
		// where REQUESTS does
		if len(l) < end || l[col:col+8] != "https://" || l[end] != ' ' || l[end-1] < '0' || l[end-1] > '9' {
			t.Errorf("row misaligned with the header:\n%s\n%s", lines[0], l)
		}
	}
}

package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/threshold"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestGoldenText compares the text rendering (with the latency
// distribution) with testdata/report.txt; -update rewrites it.
func TestGoldenText(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{Latency: true}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", text.Bytes())
}

// TestGoldenTextOpen compares an open-loop run's text rendering (service
// time and send lateness among the phases) with testdata/report_open.txt;
// -update rewrites it.
func TestGoldenTextOpen(t *testing.T) {
	r, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_open.txt", text.Bytes())
}

// TestUnknownStartIsDash: an agent whose first send is unknown (it failed
// before its end) shows "-" as its start, never +0.00us, and a skew over
// fewer than two of several agents is "-", never 0.00us.
func TestUnknownStartIsDash(t *testing.T) {
	res := result(t)
	res.Agents[1].StartOffset = nil
	res.StartSkew = durationpb.New(0) // over agent-1 alone
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	got := text.String()
	for _, want := range []string{
		"Start skew:            - across the 1 of 2 agents whose first send is known\n",
		"  agent-2                   2        400     200.00   25.0%        0          -    +0.00us -\n",
		"  agent-1                   2        600     300.00   25.0%        3   +40.00us    +0.00us -\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if !r.StartSkewUnknown || !r.AgentRows[1].StartOffsetUnknown || r.AgentRows[0].StartOffsetUnknown {
		t.Errorf("skew unknown %v, agent offsets unknown %v %v; want true, false, true", r.StartSkewUnknown, r.AgentRows[0].StartOffsetUnknown, r.AgentRows[1].StartOffsetUnknown)
	}
}

// TestStartSkewBound: the start skew carries the error the agents' clock
// samples leave (half of each sample's round trip, the two largest
// summed), in the text and the JSON; a skew over fewer than two agents
// whose first send is known has none (TestUnknownStartIsDash).
func TestStartSkewBound(t *testing.T) {
	res := result(t)
	res.Agents[0].Rtt = durationpb.New(100 * time.Microsecond)
	res.Agents[1].Rtt = durationpb.New(300 * time.Microsecond)
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.StartSkewBoundUs != 200 {
		t.Errorf("start_skew_bound_us = %v, want 200 (50 + 150)", r.StartSkewBoundUs)
	}
	var text strings.Builder
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "across agents (± 200.00us: the agents' clock samples)\n"; !strings.Contains(text.String(), want) {
		t.Errorf("no %q in\n%s", want, text.String())
	}
}

// TestStatusCodesUnlessAll200: a redirect is a completed response, not an
// error (no Non-2xx line), but the status codes are printed whenever any
// response is not 200; an all-200 run has no status line.
func TestStatusCodesUnlessAll200(t *testing.T) {
	for _, tc := range []struct {
		status     map[int32]int64
		want, none []string
	}{
		{map[int32]int64{200: 990, 302: 10}, []string{"\nStatus codes: 200 990, 302 10\n"}, []string{"Non-2xx"}},
		{map[int32]int64{301: 1000}, []string{"\nStatus codes: 301 1000\n"}, []string{"Non-2xx"}},
		{map[int32]int64{200: 1000}, nil, []string{"Status codes", "Non-2xx"}},
		{map[int32]int64{200: 999, 404: 1}, []string{"\n  Non-2xx or 3xx responses: 1\n", "\nStatus codes: 200 999, 404 1\n"}, nil},
	} {
		res := result(t)
		res.Counters.Status = tc.status
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("status %v: no %q in\n%s", tc.status, w, text.String())
			}
		}
		for _, n := range tc.none {
			if strings.Contains(text.String(), n) {
				t.Errorf("status %v: %q in\n%s", tc.status, n, text.String())
			}
		}
	}
}

// TestThresholdErrorsAreTheErrorsLine: a threshold's errors counts exactly
// what the report's Errors line counts (the requests without a response),
// and failed adds its Non-2xx or 3xx responses, as k6's http_req_failed
// (k6's rate is failed's ratio); each threshold line says which it read.
func TestThresholdErrorsAreTheErrorsLine(t *testing.T) {
	res := result(t) // 1000 responses (10 of status 503) and 3 errors
	counts, err := wire.CountsFromProto(res.GetCounters())
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []threshold.Result
	for _, s := range []string{"errors<=3", "failed<=3", "rate<0.01"} {
		th, err := threshold.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, th.EvalWindow(threshold.Window{Counts: &counts, Length: 2 * time.Second}))
	}
	res.Thresholds = wire.ThresholdsToProto(outcomes)
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"  Errors: 3 (refused 1, reset 1, timeout 1)\n",
		"  Non-2xx or 3xx responses: 10\n",
		"  pass errors<=3                3 (errors: the Errors line, requests without a response)\n",
		"  FAIL failed<=3                13 (failed: Errors plus Non-2xx or 3xx responses)\n",
		"  FAIL rate<0.01                1.2961% (failed: Errors plus Non-2xx or 3xx responses)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

package threshold

import (
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Threshold
	}{
		{"p99<3ms", Threshold{Text: "p99<3ms", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 99, Op: Less, Limit: 3000}},
		{" p99.9 <= 1.5s ", Threshold{Text: "p99.9<=1.5s", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 99.9, Op: LessEq, Limit: 1.5e6}},
		{"errors<0.1%", Threshold{Text: "errors<0.1%", Stage: -1, Kind: hist.Latency, Metric: Errors, Op: Less, Limit: 0.001, Rate: true}},
		{"errors<=10", Threshold{Text: "errors<=10", Stage: -1, Kind: hist.Latency, Metric: Errors, Op: LessEq, Limit: 10}},
		{"rps>1000", Threshold{Text: "rps>1000", Stage: -1, Kind: hist.Latency, Metric: RPS, Op: Greater, Limit: 1000}},
		{"tls_full.p99<20ms", Threshold{Text: "tls_full.p99<20ms", Stage: -1, Kind: hist.TLSFull, Metric: Percentile, Percentile: 99, Op: Less, Limit: 20000}},
		{"ttfb.p99.99<250us", Threshold{Text: "ttfb.p99.99<250us", Stage: -1, Kind: hist.TTFB, Metric: Percentile, Percentile: 99.99, Op: Less, Limit: 250}},
		{"stage2.p99<5ms", Threshold{Text: "stage2.p99<5ms", Stage: 2, Kind: hist.Latency, Metric: Percentile, Percentile: 99, Op: Less, Limit: 5000}},
		{"stage0.rps>=50", Threshold{Text: "stage0.rps>=50", Stage: 0, Kind: hist.Latency, Metric: RPS, Op: GreaterEq, Limit: 50}},
		{"max<1s", Threshold{Text: "max<1s", Stage: -1, Kind: hist.Latency, Metric: Max, Op: Less, Limit: 1e6}},
		{"ok.p99<3ms", Threshold{Text: "ok.p99<3ms", Stage: -1, Kind: hist.OK, Metric: Percentile, Percentile: 99, Op: Less, Limit: 3000}},
		{"ok.rps>1000", Threshold{Text: "ok.rps>1000", Stage: -1, Kind: hist.OK, Metric: RPS, Op: Greater, Limit: 1000}},
		{"handshake_latency.p99<50ms", Threshold{Text: "handshake_latency.p99<50ms", Stage: -1, Kind: hist.HandshakeLatency, Metric: Percentile, Percentile: 99, Op: Less, Limit: 50000}},
		{"connect.mean<2ms", Threshold{Text: "connect.mean<2ms", Stage: -1, Kind: hist.Connect, Metric: Mean, Op: Less, Limit: 2000}},
		{"failed<0.1%", Threshold{Text: "failed<0.1%", Stage: -1, Kind: hist.Latency, Metric: Failed, Op: Less, Limit: 0.001, Rate: true}},
		{"failed<=10", Threshold{Text: "failed<=10", Stage: -1, Kind: hist.Latency, Metric: Failed, Op: LessEq, Limit: 10}},
		// k6's spellings: p(N), avg, med (a bare number is milliseconds,
		// as k6's http_req_duration), and rate, k6's http_req_failed.
		{"p(95)<3ms", Threshold{Text: "p(95)<3ms", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 95, Op: Less, Limit: 3000}},
		{"p(99.9)<10ms", Threshold{Text: "p(99.9)<10ms", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 99.9, Op: Less, Limit: 10000}},
		{"p(95)<200", Threshold{Text: "p(95)<200", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 95, Op: Less, Limit: 200000}},
		{"avg<2ms", Threshold{Text: "avg<2ms", Stage: -1, Kind: hist.Latency, Metric: Mean, Op: Less, Limit: 2000}},
		{"avg<2.5", Threshold{Text: "avg<2.5", Stage: -1, Kind: hist.Latency, Metric: Mean, Op: Less, Limit: 2500}},
		{"med<=1ms", Threshold{Text: "med<=1ms", Stage: -1, Kind: hist.Latency, Metric: Percentile, Percentile: 50, Op: LessEq, Limit: 1000}},
		{"tls_full.p(99)<20ms", Threshold{Text: "tls_full.p(99)<20ms", Stage: -1, Kind: hist.TLSFull, Metric: Percentile, Percentile: 99, Op: Less, Limit: 20000}},
		{"stage1.p(99.99)<5ms", Threshold{Text: "stage1.p(99.99)<5ms", Stage: 1, Kind: hist.Latency, Metric: Percentile, Percentile: 99.99, Op: Less, Limit: 5000}},
		{"rate<0.01", Threshold{Text: "rate<0.01", Stage: -1, Kind: hist.Latency, Metric: Failed, Op: Less, Limit: 0.01, Rate: true}},
		{"rate<1%", Threshold{Text: "rate<1%", Stage: -1, Kind: hist.Latency, Metric: Failed, Op: Less, Limit: 0.01, Rate: true}},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v, want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"p99":               "want METRIC OP VALUE",
		"p99<":              "no value after <",
		"p101<3ms":          "percentile \"p101\"",
		"latency<3ms":       "unknown metric \"latency\"",
		"tls.p99<3ms":       "unknown phase \"tls\": want one of latency, service, connect, tls_full",
		"p99<3":             "want a duration",
		"errors<101%":       "from 0% to 100%",
		"rps>fast":          "rps value \"fast\"",
		"ttfb.rps>3":        "rps has no phase",
		"ok.errors<1%":      "errors has no phase",
		"stage1.ok.p99<3ms": "a stage keeps only its latency",
		"stage1.ttfb.p99<3": "a stage keeps only its latency",
		"stagex.p99<3ms":    "want stageN",
		"a.b.c.p99<3ms":     "want [stageN.][PHASE.]METRIC",
		"p(95<3ms":          `percentile "p(95": want p(N)`,
		"p(x)<3ms":          `percentile "p(x)": want p(N)`,
		"p(101)<3ms":        `percentile "p101"`,
		"rate<2":            "rate value \"2\": want a ratio from 0 to 1",
		"ok.failed<1%":      "failed has no phase",
		"max<200":           "max value \"200\": want a duration",
		"error_rate<1%":     "unknown metric \"error_rate\"",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("Parse(%q) error = %v, want one naming it and containing %q", in, err, want)
		}
	}
	if _, err := ParseAll([]string{"p99<3ms", "x<1", "y>2"}); err == nil || !strings.Contains(err.Error(), `"x<1"`) || !strings.Contains(err.Error(), `"y>2"`) {
		t.Errorf("ParseAll error = %v, want both bad thresholds named", err)
	}
}

func window(t *testing.T, latenciesUs []int64, status200, status500, timeouts int64, length time.Duration) Window {
	t.Helper()
	s := hist.NewSet()
	for _, v := range latenciesUs {
		s.Latency.RecordMicros(v)
	}
	c := &measure.Counts{Requests: status200 + status500}
	c.Status[200], c.Status[500] = status200, status500
	c.Errors[measure.ErrTimeout] = timeouts
	return Window{Histograms: s, Counts: c, Length: length}
}

func TestEval(t *testing.T) {
	lat := make([]int64, 0, 1000)
	for i := range int64(1000) {
		lat = append(lat, i+1) // 1..1000 us: p99 = 990 us
	}
	w := window(t, lat, 990, 10, 0, 2*time.Second) // 1000 responses in 2 s, 10 of them 500s
	d := Data{Window: w, Stages: []Window{w, {}}}
	for _, c := range []struct {
		th     string
		value  float64
		pass   bool
		noData bool
	}{
		{"p99<1ms", 990, true, false},
		{"p99<990us", 990, false, false},
		{"p99<=990us", 990, true, false},
		{"max<1ms", 1000, false, false},
		{"rps>499", 500, true, false},
		{"rps>500", 500, false, false},
		// errors counts the report's Errors line (no transport error
		// here); failed and k6's rate add the 10 responses of status 500.
		{"errors<1%", 0, true, false},
		{"errors<1", 0, true, false},
		{"failed<1%", 0.01, false, false},
		{"failed<=1%", 0.01, true, false},
		{"failed<11", 10, true, false},
		{"rate<0.01", 0.01, false, false},
		{"rate<=0.01", 0.01, true, false},
		{"p(99)<1ms", 990, true, false},
		{"med<=500us", 500, true, false},
		{"tls_full.p99<20ms", 0, false, true}, // no handshake: no data, never a pass
		{"stage0.p99<1ms", 990, true, false},
		{"stage1.p99<1ms", 0, false, true},
		{"stage5.p99<1ms", 0, false, true},
	} {
		th, err := Parse(c.th)
		if err != nil {
			t.Fatal(err)
		}
		r := th.Eval(d)
		if r.Value != c.value || r.Pass != c.pass || r.NoData != c.noData || r.Threshold != c.th {
			t.Errorf("Eval(%s) = %+v, want value %v pass %v no_data %v", c.th, r, c.value, c.pass, c.noData)
		}
	}
	// ok.: the 500s were the fast responses (1..10 us); the 990 successes
	// took 11..1000 us, so their p50 is above the whole's and their rate
	// leaves the 500s out, while p99 and rps stay as they were.
	for i := range int64(990) {
		w.Histograms.OK.RecordMicros(i + 11)
	}
	for _, c := range []struct {
		th    string
		value float64
	}{{"ok.p50<1ms", 505}, {"p50<1ms", 500}, {"ok.rps>1", 495}, {"rps>1", 500}, {"ok.max<1s", 1000}} {
		th, err := Parse(c.th)
		if err != nil {
			t.Fatal(err)
		}
		if r := th.EvalWindow(w); r.Value != c.value || !r.Pass {
			t.Errorf("EvalWindow(%s) = %+v, want value %v, pass", c.th, r, c.value)
		}
	}
	// Transport errors count in the rate's numerator and denominator, of
	// errors and failed alike.
	w2 := window(t, []int64{100}, 9, 0, 1, time.Second)
	for _, s := range []string{"errors<10%", "failed<10%", "rate<0.1"} {
		th, _ := Parse(s)
		if r := th.EvalWindow(w2); r.Value != 0.1 || r.Pass {
			t.Errorf("%s on 9 responses and 1 timeout = %+v, want 0.1, fail", s, r)
		}
	}
}

// TestCheckStages: a threshold on a stage the plan lacks is refused
// before the run, named with the stages there are; the window's and
// existing stages' pass.
func TestCheckStages(t *testing.T) {
	ts, err := ParseAll([]string{"p99<3ms", "stage0.p99<1ms", "stage1.rps>10", "stage3.p99<50ms"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStages(ts[:3], 2); err != nil {
		t.Errorf("CheckStages(window, stage0, stage1; 2 stages) = %v, want nil", err)
	}
	for stages, want := range map[int]string{
		0: `"stage0.p99<1ms": the plan has no stages`,
		1: `"stage1.rps>10": the plan has 1 stage, stage0; "stage3.p99<50ms": the plan has 1 stage, stage0`,
		3: `"stage3.p99<50ms": the plan has 3 stages, stage0 to stage2 (numbered from 0, as the report's Stage column)`,
	} {
		if err := CheckStages(ts, stages); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckStages(%d stages) = %v, want %q", stages, err, want)
		}
	}
}

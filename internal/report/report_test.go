package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// quantiles returns an interval's latency histogram (V2 compressed) of 100
// samples whose p50, p90, p99 and max are the given µs.
func quantiles(t *testing.T, p50, p90, p99, maxUs int64) []byte {
	t.Helper()
	h := hist.New()
	for i := 1; i <= 100; i++ {
		switch {
		case i <= 50:
			h.RecordMicros(p50)
		case i <= 90:
			h.RecordMicros(p90)
		case i <= 99:
			h.RecordMicros(p99)
		default:
			h.RecordMicros(maxUs)
		}
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// result builds a RunResult of two agents whose latencies are 1..1000 µs.
func result(t *testing.T) *pb.RunResult {
	t.Helper()
	h := hist.New()
	for v := int64(1); v <= 1000; v++ {
		h.RecordMicros(v)
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// The 990 responses of status 200 are the slow ones (11..1000 µs), the
	// ten 503s the fast 1..10 µs.
	okh := hist.New()
	for v := int64(11); v <= 1000; v++ {
		okh.RecordMicros(v)
	}
	okb, _ := okh.Encode()
	empty, _ := hist.New().Encode()
	conn := hist.New()
	conn.RecordMicros(50)
	conn.RecordMicros(70)
	cb, _ := conn.Encode()
	resumed := hist.New()
	resumed.RecordMicros(20)
	rb, _ := resumed.Encode()
	return &pb.RunResult{
		RunId:             "20261130T000000Z-abcdef",
		Plan:              &pb.Plan{Url: "https://127.0.0.1:8443/", Connections: 4},
		StartedAtUnixNano: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixNano(),
		Window:            durationpb.New(2 * time.Second),
		Histograms:        &pb.Histograms{Latency: b, Connect: cb, TlsFull: cb, TlsResumed: rb, Ttfb: b, ServiceTime: empty, Lateness: empty, OkLatency: okb},
		Timeline: []*pb.TimelinePoint{
			{Index: 0, Start: durationpb.New(0), Length: durationpb.New(time.Second), Requests: 480, Errors: 1, Latency: quantiles(t, 480, 900, 990, 1000), CpuBusy: []float64{0.25, 0.25}},
			{Index: 1, Start: durationpb.New(time.Second), Length: durationpb.New(time.Second), Requests: 520, Errors: 2, Latency: quantiles(t, 520, 910, 991, 999), CpuBusy: []float64{0.26, 0.24}},
		},
		Counters: &pb.Counters{
			Issued: 1005, Requests: 1000, BytesRead: 1 << 20, HeaderBytes: 150_000, BodyBytes: 890_000, HeaderFieldBytes: 250_000,
			ContentEncoding:   map[string]int64{"br": 980, "identity": 20},
			Status:            map[int32]int64{200: 990, 503: 10},
			Errors:            map[string]int64{"refused": 1, "reset": 1, "timeout": 1},
			ConnectionsOpened: 2, Reconnects: 0, HandshakesFull: 2, HandshakesResumed: 1,
			Tls: map[string]int64{"version:TLS 1.3": 2, "cipher:TLS_AES_128_GCM_SHA256": 2, "group:X25519": 2, "alpn:http/1.1": 2},
		},
		InFlight:  2,
		StartSkew: durationpb.New(150 * time.Microsecond),
		Agents: []*pb.AgentResult{
			{Name: "agent-1", Connections: 2, Requests: 600, Errors: 3, CpuTime: durationpb.New(time.Second), Cpus: 2, StartOffset: durationpb.New(40 * time.Microsecond),
				IntervalRps: []float64{290, 310}},
			{Name: "agent-2", Connections: 2, Requests: 400, CpuTime: durationpb.New(500 * time.Millisecond), Cpus: 1, StartOffset: durationpb.New(190 * time.Microsecond), Error: "agent agent-2: stream ended without a result",
				IntervalRps: []float64{190, 210}},
		},
	}
}

// openResult is result as an open-loop run at 500/s whose sends were
// 3-40 µs late (p99 lateP99 µs) and whose service times are 1..1000 µs
// less 20 µs: the report then carries the lateness histogram.
func openResult(t *testing.T, lateP99 int64) *pb.RunResult {
	t.Helper()
	res := result(t)
	res.Plan.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 500}}
	late := hist.New()
	for i := range 1003 { // every send, failed ones included
		switch {
		case i < 500:
			late.RecordMicros(3)
		case i < 990:
			late.RecordMicros(12)
		case i < 1000:
			late.RecordMicros(lateP99)
		default:
			late.RecordMicros(lateP99 + 30)
		}
	}
	service := hist.New()
	for v := int64(1); v <= 1000; v++ {
		service.RecordMicros(max(v-20, 1))
	}
	var err error
	if res.Histograms.Lateness, err = late.Encode(); err != nil {
		t.Fatal(err)
	}
	if res.Histograms.ServiceTime, err = service.Encode(); err != nil {
		t.Fatal(err)
	}
	for i, pt := range res.Timeline {
		pt.TargetRps = 500
		pt.Lateness = quantiles(t, 3, 12, lateP99-int64(i), lateP99+30)
	}
	return res
}

// TestLatenessReported: an open-loop report carries the send lateness
// (run and timeline); a closed-loop one does not, even if a histogram came.
func TestLatenessReported(t *testing.T) {
	r, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	if l := r.SendLatenessUs; l == nil || l.Count != 1003 || l.P50 != 12 || l.P99 != 40 || l.Max != 70 {
		t.Fatalf("send lateness %+v, want 1003 sends, p50 12, p99 40, max 70 us", l)
	}
	if r.ClientBound {
		t.Errorf("lateness p99 40 us flagged: %q", r.ClientBoundReasons)
	}
	if len(r.Timeline) != 2 || r.Timeline[0].LatenessP99Us != 40 || r.Timeline[1].LatenessP99Us != 39 {
		t.Errorf("timeline lateness p99 %+v, want 40 and 39 us", r.Timeline)
	}
	closed := openResult(t, 40)
	closed.Plan.Load = nil
	rc, err := wire.ReportFromResult(closed)
	if err != nil {
		t.Fatal(err)
	}
	if rc.SendLatenessUs != nil || rc.Timeline[0].LatenessP99Us != 0 {
		t.Errorf("closed loop shows lateness %+v, timeline %d", rc.SendLatenessUs, rc.Timeline[0].LatenessP99Us)
	}
	var text bytes.Buffer
	if err := rc.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "Lateness") {
		t.Errorf("closed-loop text shows lateness:\n%s", text.String())
	}
}

// TestClientLateFlagged: a send lateness p99 above report.LatenessLimit
// alone (sends that waited for a busy connection) does not flag the run;
// more than 1 % of the scheduled sends client-late (over the limit by the
// agents' own delay) does, naming the agents with the most; 1 % does not.
func TestClientLateFlagged(t *testing.T) {
	// The histogram's p99 is its bucket's upper bound: 2.5 ms is 2.50 ms.
	res := openResult(t, 2500)
	res.Counters.Queued = 20
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientBound || r.SendLatenessUs.P99 <= report.LatenessLimit.Microseconds() {
		t.Errorf("lateness p99 %d us from queued sends: client-bound %v %q, want not flagged", r.SendLatenessUs.P99, r.ClientBound, r.ClientBoundReasons)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "; 20 waited for a busy connection\n") {
		t.Errorf("text without the queued sends:\n%s", text.String())
	}
	// 1005 issued (2 of them in flight at the end) and none unsent: 1005
	// scheduled (openResult), so 1 % is 10.05 sends.
	for _, c := range []struct {
		late    int64
		flagged bool
	}{{10, false}, {11, true}} {
		res := openResult(t, 2500)
		res.Counters.ClientLate = c.late
		res.Agents[0].ClientLate, res.Agents[1].ClientLate = c.late-1, 1
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		if r.ClientBound != c.flagged {
			t.Errorf("%d client-late sends: client-bound %v %q, want %v", c.late, r.ClientBound, r.ClientBoundReasons, c.flagged)
		}
		want := fmt.Sprintf("%d of %d scheduled sends (1.1 %%) left over 1.00ms late by the agents' own delay (agent agent-1's %d, agent agent-2's 1)", c.late, r.Issued+r.Unsent, c.late-1)
		if c.flagged && (len(r.ClientBoundReasons) != 1 || r.ClientBoundReasons[0] != want) {
			t.Errorf("reasons %q, want [%q]", r.ClientBoundReasons, want)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("; %d left over 1.00ms late by the agents' own delay\n", c.late); !strings.Contains(text.String(), want) {
			t.Errorf("text without %q:\n%s", want, text.String())
		}
		if r.ClientLate != c.late || r.AgentRows[0].ClientLate != c.late-1 {
			t.Errorf("client_late %d, agent-1's %d: want %d and %d", r.ClientLate, r.AgentRows[0].ClientLate, c.late, c.late-1)
		}
	}
	// More than three agents with client-late sends: the three with the
	// most, and how many more.
	res = openResult(t, 2500)
	res.Counters.ClientLate = 20
	res.Agents[0].ClientLate, res.Agents[1].ClientLate = 2, 1
	for i, n := range []int64{9, 5, 3} {
		res.Agents = append(res.Agents, &pb.AgentResult{Name: fmt.Sprintf("agent-%d", i+3), ClientLate: n, CpuTime: durationpb.New(0), Cpus: 1})
	}
	r, err = wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if want := "(agent agent-3's 9, agent agent-4's 5, agent agent-5's 3, 2 more agents)"; len(r.ClientBoundReasons) != 1 || !strings.HasSuffix(r.ClientBoundReasons[0], want) {
		t.Errorf("reasons %q, want one ending %q", r.ClientBoundReasons, want)
	}
}

func TestFromResult(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.RPS != 500 || r.TransferBps != float64(1<<20)/2 || r.Non2xx3xx != 10 || r.ErrorTotal() != 3 {
		t.Errorf("rps %v, transfer %v, non2xx %d, errors %d", r.RPS, r.TransferBps, r.Non2xx3xx, r.ErrorTotal())
	}
	if r.Issued != r.Requests+r.ErrorTotal()+r.InFlight {
		t.Errorf("issued %d != %d + %d + %d", r.Issued, r.Requests, r.ErrorTotal(), r.InFlight)
	}
	if r.Latency.P50 != 500 || r.Latency.P99 != 990 || r.Latency.Max != 1000 {
		t.Errorf("latency %+v", r.Latency)
	}
	if a := r.AgentRows[0]; a.RPS != 300 || a.CPUUtil != 0.25 {
		t.Errorf("agent-1 rps %v cpu %v, want 300 and 0.25 (1 s CPU / (2 s × 2 CPUs))", a.RPS, a.CPUUtil)
	}
	if a := r.AgentRows[1]; a.CPUUtil != 0.25 || a.Error == "" {
		t.Errorf("agent-2 cpu %v error %q", a.CPUUtil, a.Error)
	}
	if len(r.Timeline) != 2 || r.Timeline[1].RPS != 520 || r.Timeline[1].StartS != 1 {
		t.Errorf("timeline %+v", r.Timeline)
	}
	if r.Mode != "closed" || r.ClientBound {
		t.Errorf("mode %q client-bound %v", r.Mode, r.ClientBound)
	}
}

func TestClientBound(t *testing.T) {
	res := result(t)
	res.Agents[0].CpuTime = durationpb.New(3800 * time.Millisecond) // 95 % of 2 CPUs × 2 s
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ClientBound || len(r.ClientBoundReasons) != 1 || !strings.Contains(r.ClientBoundReasons[0], "agent-1's CPUs were 95 % busy") {
		t.Fatalf("client-bound %v %q", r.ClientBound, r.ClientBoundReasons)
	}
	res = result(t)
	res.Plan.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 500}}
	res.Counters.Missed = 20 // 2 % of 1005 issued
	if r, _ = wire.ReportFromResult(res); !r.ClientBound || r.Mode != "open" || r.LatencyBasis != "intended send" {
		t.Fatalf("open loop with 2 %% missed: client-bound %v mode %q basis %q", r.ClientBound, r.Mode, r.LatencyBasis)
	}
	// Sends never made are in missed but not in issued: the share is of
	// the sends scheduled (issued + unsent), never above 100 %, and the
	// never-sent are named apart, in the reason and the text.
	overloaded := result(t)
	overloaded.Plan.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 500}}
	overloaded.Counters.Missed, overloaded.Counters.Unsent = 1947, 1000 // 947 late, 1000 never sent; 1005 issued
	ro, err := wire.ReportFromResult(overloaded)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1947 of 2005 scheduled sends (97.1 %) started over 5.00ms late or never (947 late, 1000 never sent)"; !ro.ClientBound || len(ro.ClientBoundReasons) != 1 || ro.ClientBoundReasons[0] != want || ro.Unsent != 1000 {
		t.Fatalf("overloaded open loop: client-bound %v, reasons %q, unsent %d; want %q", ro.ClientBound, ro.ClientBoundReasons, ro.Unsent, want)
	}
	var ob strings.Builder
	if err := ro.WriteText(&ob, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ob.String(), "1947 sends started over 5.00ms late (missed)") {
		t.Errorf("overloaded open-loop text report:\n%s\nwant the never-sent named", ob.String())
	}
	// The notes say where open-loop latency starts; the distribution's
	// heading is wrk's.
	var b strings.Builder
	if err := r.WriteText(&b, report.TextOptions{Latency: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "requests/sec target; latency from each request's intended send time\n") ||
		!strings.Contains(b.String(), "\n  Latency Distribution\n") {
		t.Errorf("open-loop text report:\n%s\nwant the latency measured from the intended send time, and wrk's distribution heading", b.String())
	}
	if strings.Contains(b.String(), "paced in") || r.PacingWindowUs != 0 || strings.Contains(b.String(), "paced with a spin") || r.PacingSpin {
		t.Errorf("open loop without a pacing window or spin reports one (%d µs, spin %v):\n%s", r.PacingWindowUs, r.PacingSpin, b.String())
	}
	// A pacing window and the spin reach the report from the plan: the
	// text says the sends were bunched and spun to, the JSON gives both.
	paced := result(t)
	paced.Plan.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 500, PacingWindow: durationpb.New(time.Millisecond), PacingSpin: true}}
	rp, err := wire.ReportFromResult(paced)
	if err != nil {
		t.Fatal(err)
	}
	var pt strings.Builder
	if err := rp.WriteText(&pt, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(rp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pt.String(), "  paced in 1ms windows: each intended send time rounded down") || !strings.Contains(string(js), `"pacing_window_us":1000`) {
		t.Errorf("open loop with a 1-ms pacing window: text\n%s\nJSON %s\nwant the window stated in both", pt.String(), js)
	}
	if !strings.Contains(pt.String(), "  paced with a spin: each send's timer wait ended up to 100µs early") || !strings.Contains(string(js), `"pacing_spin":true`) {
		t.Errorf("open loop with the pacing spin: text\n%s\nJSON %s\nwant the spin stated in both", pt.String(), js)
	}
}

func TestFromResultRejectsCorruptHistogram(t *testing.T) {
	res := result(t)
	res.Histograms.Latency = res.Histograms.Latency[:len(res.Histograms.Latency)/2]
	if _, err := wire.ReportFromResult(res); err == nil || !strings.Contains(err.Error(), "decode histogram") {
		t.Fatalf("wire.ReportFromResult(corrupt) = %v, want a decode error", err)
	}
}

func TestEmptyHistogramSaysNoSamples(t *testing.T) {
	res := result(t)
	b, _ := hist.New().Encode()
	res.Histograms.Latency = b
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{Latency: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "  Latency: no samples\n") || strings.Contains(text.String(), "NaN") ||
		!strings.Contains(text.String(), "\n    Latency          -         -        -       -\n") || !strings.Contains(text.String(), "\n  Latency Distribution: none (no samples)\n") ||
		strings.Contains(text.String(), "50%") {
		t.Fatalf("text report of an empty run:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["latency_us"]; !ok || v != nil {
		t.Fatalf("latency_us = %v, want null", v)
	}
}

// golden compares got with testdata/name; with -update it rewrites the
// file instead (after an intended change).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestTextHeader checks the header lines: singular and plural counts, a
// rounded window, count mode, and a staged open-loop target.
func TestTextHeader(t *testing.T) {
	text := func(res *pb.RunResult) string {
		t.Helper()
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := r.WriteText(&b, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	res := result(t)
	res.Agents = res.Agents[:1]
	res.Plan.Connections = 1
	res.Window = durationpb.New(1784512004 * time.Nanosecond)
	if got := text(res); !strings.HasPrefix(got, "Running 1.78s test @ https://127.0.0.1:8443/\n  1 agent and 1 connection\n") {
		t.Errorf("one agent, one connection, 1.784512004 s:\n%s", got)
	}
	res.Plan.Requests = 100000
	if got := text(res); !strings.HasPrefix(got, "Running 100000-request test @ ") {
		t.Errorf("count mode:\n%s", got)
	}
	res.Plan.Duration = durationpb.New(2 * time.Second) // -n with -d: whichever comes first
	if got := text(res); !strings.HasPrefix(got, "Running 100000-request test (at most 2s) @ https://127.0.0.1:8443/\n") {
		t.Errorf("count mode bounded by -d 2s:\n%s", got)
	}
	res = result(t)
	res.Window = durationpb.New(90 * time.Second)
	res.Plan.Load = &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 500}}
	res.Timeline = []*pb.TimelinePoint{{Length: durationpb.New(90 * time.Second), TargetRps: 1357}}
	empty, _ := hist.New().Encode()
	res.Stages = []*pb.StageResult{
		{Index: 0, Duration: durationpb.New(30 * time.Second), TargetFrom: 500, TargetTo: 2000, Latency: empty},
		{Index: 1, Duration: durationpb.New(60 * time.Second), TargetFrom: 2000, TargetTo: 2000, Latency: empty},
	}
	got := text(res)
	for _, want := range []string{
		"Running 1m30s test @ ",
		"  open loop, 2 stages, 500→2000→2000 requests/sec target (mean 1357); latency from each request's intended send time\n",
		"  Mean target 1357.00 requests/sec, achieved ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("staged open loop: no %q in\n%s", want, got)
		}
	}
}

// TestStoppedEarly: a window ended by the user says so in the text (the
// header keeps the planned window) and the JSON, and every rate is over the
// shortened window; an empty stopped window renders without NaN.
func TestStoppedEarly(t *testing.T) {
	res := result(t)
	res.Plan.Duration = durationpb.New(10 * time.Second)
	res.Window = durationpb.New(4210 * time.Millisecond)
	res.StoppedEarly = true
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if !r.StoppedEarly || r.DurationS != 4.21 || r.PlanDurationS != 10 || r.RPS != 1000/4.21 || r.AgentRows[0].RPS != 600/4.21 {
		t.Errorf("stopped %v, window %v of %v, rps %v, agent-1 rps %v", r.StoppedEarly, r.DurationS, r.PlanDurationS, r.RPS, r.AgentRows[0].RPS)
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Running 10s test @ https://127.0.0.1:8443/\n  2 agents and 4 connections\n  Stopped early by the user after 4.21s of 10s\n",
		"  1000 requests in 4.21s, ",
		"Requests/sec:    237.53\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["stopped_early"] != true || m["duration_s"] != 4.21 || m["plan_duration_s"] != 10.0 {
		t.Errorf("JSON stopped_early %v, duration_s %v, plan_duration_s %v", m["stopped_early"], m["duration_s"], m["plan_duration_s"])
	}

	// Not stopped: no such line, and "stopped_early": false.
	r, _ = wire.ReportFromResult(result(t))
	text.Reset()
	js.Reset()
	_ = r.WriteText(&text, report.TextOptions{})
	_ = r.WriteJSON(&js)
	if strings.Contains(text.String(), "Stopped early") || !strings.Contains(js.String(), `"stopped_early": false`) {
		t.Errorf("a run that was not stopped:\n%s\n%s", text.String(), js.String())
	}

	// Stopped before anything ended in the window: an empty window.
	res.Window = durationpb.New(0)
	if r, err = wire.ReportFromResult(res); err != nil {
		t.Fatal(err)
	}
	text.Reset()
	_ = r.WriteText(&text, report.TextOptions{})
	if !strings.Contains(text.String(), "Stopped early by the user after 0.00s of 10s") || strings.Contains(text.String(), "NaN") || strings.Contains(text.String(), "Inf") {
		t.Errorf("empty stopped window:\n%s", text.String())
	}
}

// partialResult is result with agent-2 lost 1.2 s into a 10 s window, its
// load held up to 1 s: the other agent was stopped at the loss (abort).
func partialResult(t *testing.T) *pb.RunResult {
	res := result(t)
	res.Plan.Duration = durationpb.New(10 * time.Second)
	res.Window = durationpb.New(1300 * time.Millisecond)
	res.Partial, res.Aborted = true, true
	res.Timeline[1].Partial, res.Timeline[1].Agents, res.Timeline[0].Agents = true, 1, 2
	a := res.Agents[1]
	a.Lost, a.LostAt, a.Ran = true, durationpb.New(1200*time.Millisecond), durationpb.New(time.Second)
	a.Error = "agent agent-2: stream ended (error reading from server: EOF)"
	return res
}

// TestPartialGolden: a run that lost an agent names it, when, how, its
// share, and what the policy did, in the text and the JSON (golden files);
// its rates are over the window that ran, the lost agent's over its own.
func TestPartialGolden(t *testing.T) {
	r, err := wire.ReportFromResult(partialResult(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Partial || !r.Aborted || len(r.LostAgents) != 1 || r.LostAgents[0].Name != "agent-2" || r.LostAgents[0].LostAtS != 1.2 {
		t.Fatalf("partial %v, aborted %v, lost %+v", r.Partial, r.Aborted, r.LostAgents)
	}
	if rps := float64(r.Requests) / 1.3; r.RPS != rps || r.AgentRows[1].RPS != 400 || !r.AgentRows[1].Lost {
		t.Errorf("rps %v (want 1000/1.3), agent-2 rps %v (want 400 over its 1 s), lost %v", r.RPS, r.AgentRows[1].RPS, r.AgentRows[1].Lost)
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "partial.txt", text.Bytes())
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "partial.json", js.Bytes())
}

// TestLostAgentStart: a lost agent's row shows its start offset when its
// intervals gave its first send, else "lost", and its error line says it
// was lost: when, and whether before the start or before any send was
// reported; never a bare "-".
func TestLostAgentStart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		offset        *durationpb.Duration
		lostAt        time.Duration
		start, reason string
	}{
		{"started", durationpb.New(190 * time.Microsecond), 1200 * time.Millisecond, "+190.00us", "! lost after 1.20s: agent agent-2: stream ended"},
		{"no send reported", nil, 400 * time.Millisecond, "lost", "! lost after 0.40s, before reporting a send: agent agent-2: stream ended"},
		{"before the start", nil, -50 * time.Millisecond, "lost", "! lost before the start: agent agent-2: stream ended"},
	} {
		res := partialResult(t)
		a := res.Agents[1]
		a.StartOffset, a.LostAt = tc.offset, durationpb.New(tc.lostAt)
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		var row, next string
		lines := strings.Split(text.String(), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "  agent-2 ") && i+1 < len(lines) {
				row, next = l, lines[i+1]
			}
		}
		if f := strings.Fields(row); len(f) < 9 || f[6] != tc.start || !strings.HasPrefix(strings.TrimSpace(next), tc.reason) {
			t.Errorf("%s: agent-2's row %q and its next line %q; want START %q and %q", tc.name, row, next, tc.start, tc.reason)
		}
	}
}

// TestAgentRateOverItsWindow: in count mode each agent's window ends at
// its last response (AgentResult.ran): its row's REQ/S and CPU are over
// that window, as its Req/Sec samples are, not over the run's longer
// window; an agent without ran keeps the run's.
func TestAgentRateOverItsWindow(t *testing.T) {
	res := result(t)
	res.Agents[1].Ran = durationpb.New(1600 * time.Millisecond) // agent-2 finished its count 0.4 s before agent-1
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := r.AgentRows[0], r.AgentRows[1]
	if a1.RPS != 300 || a1.RanS != 0 || a2.RPS != 250 || a2.RanS != 1.6 || a2.CPUUtil != 0.5/1.6 {
		t.Errorf("agent-1 rps %v ran %v, agent-2 rps %v ran %v cpu %v; want 300 over the 2 s window, 250 and CPU 0.3125 over its own 1.6 s",
			a1.RPS, a1.RanS, a2.RPS, a2.RanS, a2.CPUUtil)
	}
}

// TestPartialPolicyWording: the text says what the plan's policy did, and
// never "continue" for a plan that said abort but whose other agents were
// not stopped (the loss was the coordinator's stall, or came at the end).
func TestPartialPolicyWording(t *testing.T) {
	for _, tc := range []struct {
		policy  pb.AgentLossPolicy
		aborted bool
		want    string
		not     string
	}{
		{pb.AgentLossPolicy_AGENT_LOSS_POLICY_ABORT, true, "Aborted (on_agent_loss abort)", "continue"},
		{pb.AgentLossPolicy_AGENT_LOSS_POLICY_CONTINUE, false, "Partial (on_agent_loss continue)", "Aborted"},
		{pb.AgentLossPolicy_AGENT_LOSS_POLICY_ABORT, false, "Partial: the other agents were not stopped at the loss", "continue"},
	} {
		res := partialResult(t)
		res.Aborted = tc.aborted
		res.Plan.OnAgentLoss = tc.policy
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		if s := text.String(); !strings.Contains(s, tc.want) || strings.Contains(s, tc.not) {
			t.Errorf("policy %v, aborted %v: text lacks %q or has %q:\n%s", tc.policy, tc.aborted, tc.want, tc.not, s)
		}
	}
}

// TestNoRequestCompletedLatency: a run whose requests all failed says "no
// request completed" once (the warning), with no "no samples" line and no
// percentile table of dashes (latency_us null in JSON); the Latency
// Distribution line says why there is none.
func TestNoRequestCompletedLatency(t *testing.T) {
	res := result(t)
	b, _ := hist.New().Encode()
	res.Histograms.Latency, res.Histograms.OkLatency = b, b
	res.Counters.Requests, res.Counters.Status, res.Counters.Errors = 0, nil, map[string]int64{"reset": 7}
	for _, pt := range res.Timeline {
		pt.Requests, pt.Latency = 0, b
	}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{Latency: true}); err != nil {
		t.Fatal(err)
	}
	s := text.String()
	if strings.Count(s, "no request completed") != 2 || !strings.Contains(s, "WARNING: no request completed") ||
		!strings.Contains(s, "\n  Latency Distribution: none (no request completed in the window)\n") ||
		strings.Contains(s, "no samples") || strings.Contains(s, "50%") || !strings.Contains(s, "\n    Latency          -         -        -       -\n") {
		t.Errorf("text report of a run with errors only:\n%s", s)
	}
	if r.Latency != nil {
		t.Errorf("latency %+v, want none", r.Latency)
	}
}

// TestLossTargetText: an open-loop run that lost an agent gives, beside
// the target the live agents were asked for (the report's, averaged over
// the window), the plan's and the share that stopped with the agent (the
// fresh-user trial read "641 requests/sec target" for a plan of 1000).
func TestLossTargetText(t *testing.T) {
	r, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Timeline) < 2 {
		t.Fatalf("the fixture has %d timeline points", len(r.Timeline))
	}
	r.Timeline[len(r.Timeline)-1].TargetRPS = 320
	r.TargetRPS = 410
	r.Partial = true
	r.LostAgents = []report.LostAgent{{Name: "a2", LostAtS: 1, Rate: 180, Error: "agent a2: silent for 2s"}}
	var b bytes.Buffer
	if err := r.WriteText(&b, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	loss := "(the plan's 500; agent a2's share of 180 stopped with it at 1.00s)"
	for _, want := range []string{"open loop at 410 requests/sec target " + loss, "Target 410.00 requests/sec " + loss + ", achieved"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, b.String())
		}
	}
	r.LostAgents = nil
	b.Reset()
	if err := r.WriteText(&b, report.TextOptions{}); err != nil || strings.Contains(b.String(), "the plan's") {
		t.Errorf("no loss: the text names the plan's target:\n%s", b.String())
	}
}

package report_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestConnectionRateReported: a connection-rate result's report gives the
// target and achieved connections/s, in the text and the JSON model, and
// no requests/s target; its timeline, each interval's and agent's rate.
func TestConnectionRateReported(t *testing.T) {
	res := openResult(t, 40)
	res.Plan.ConnectionRate, res.Plan.RequestsPerConnection, res.Plan.MaxConnections = true, 2, 64
	res.Counters.ConnectionsOpened = 990
	for _, pt := range res.Timeline {
		pt.Connections, pt.AgentConnections = 495, []int64{300, 195}
	}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	cr := r.ConnectionRate
	if cr == nil || cr.TargetCPS != 500 || cr.Connections != 990 || cr.RequestsPerConnection != 2 || cr.CPS != 990/r.DurationS || r.TargetRPS != 0 {
		t.Fatalf("connection rate %+v, target_rps %v: want target 500/s, 990 connections over %.1f s, 2 requests each, no requests/s target", cr, r.TargetRPS, r.DurationS)
	}
	pt := r.Timeline[0]
	if pt.Connections != 495 || pt.CPS != 495/pt.DurationS || len(pt.AgentCPS) != 2 || pt.AgentCPS[1] != 195/pt.DurationS {
		t.Errorf("timeline point %+v: want 495 connections, per agent 300 and 195", pt)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	// The header's bound is --max-open's, not -c's "N connections".
	for _, want := range []string{"agents, target 500.00 connections/sec, at most 64 connections open at once (--max-open)\n", "connection rate at 500 connections/sec target; 2 requests per connection", "Conn rate:    Target 500.00 connections/sec, achieved"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "requests/sec target") || strings.Contains(text.String(), " agents and ") {
		t.Errorf("text shows a requests/s target:\n%s", text.String())
	}
}

// TestPortsErrorsAdvised: a run with ports errors (EADDRNOTAVAIL) counts
// them as wrk's connect errors and says what to do.
func TestPortsErrorsAdvised(t *testing.T) {
	res := result(t)
	res.Counters.Errors = map[string]int64{"ports": 3}
	res.Counters.Issued += 3
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if se := r.SocketErrors(); se.Connect != 3 {
		t.Errorf("socket errors %+v: want 3 connect", se)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ports: the client ran out of ephemeral ports (EADDRNOTAVAIL): add source addresses (--source-ips)") {
		t.Errorf("text lacks the ports advice:\n%s", text.String())
	}
}

// TestGrowthRefusedAndHandshakeLatencyReported: growth refused at the
// connection cap is in the JSON model, each timeline point and the text's
// Conn rate line, and a connection rate's handshake latency is a phase;
// a run without them shows neither.
func TestGrowthRefusedAndHandshakeLatencyReported(t *testing.T) {
	res := openResult(t, 40)
	res.Plan.ConnectionRate, res.Plan.RequestsPerConnection = true, 1
	res.Counters.Missed, res.Counters.GrowthRefused = 300, 120
	res.Timeline[0].GrowthRefused, res.Timeline[1].GrowthRefused = 70, 50
	hl := hist.New()
	for v := int64(1); v <= 100; v++ {
		hl.RecordMicros(1000 * v)
	}
	var err error
	if res.Histograms.HandshakeLatency, err = hl.Encode(); err != nil {
		t.Fatal(err)
	}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.GrowthRefused != 120 || r.Timeline[0].GrowthRefused != 70 || r.Timeline[1].GrowthRefused != 50 {
		t.Errorf("growth refused %d, timeline %d and %d: want 120, 70 and 50", r.GrowthRefused, r.Timeline[0].GrowthRefused, r.Timeline[1].GrowthRefused)
	}
	if h := r.HandshakeLatencyUs; h == nil || h.Count != 100 || h.Max < 99_000 {
		t.Errorf("handshake latency %+v: want 100 samples up to 100 ms", h)
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"300 starts over 5.00ms late (missed); 120 found every connection busy at the --max-open cap (growth refused)", "  Handshake lat "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{`"growth_refused": 120`, `"growth_refused": 70`, `"handshake_latency_us": {`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}

	plain, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	js.Reset()
	if err := plain.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := plain.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "growth refused") || strings.Contains(text.String(), "Handshake lat") || strings.Contains(js.String(), "growth_refused") || strings.Contains(js.String(), "handshake_latency") {
		t.Errorf("a run without them reports growth refused or handshake latency:\n%s", text.String())
	}
}

// TestConnectionRateBound: a handshake-only connection rate issues no
// request, so its late starts are judged against the connections it
// scheduled (opened, failed to open, never started), not against the
// requests: 30 late of 1,000 starts is client-bound, 5 is not.
func TestConnectionRateBound(t *testing.T) {
	for _, c := range []struct {
		missed int64
		bound  bool
	}{{30, true}, {5, false}} {
		res := openResult(t, 40) // lateness p99 40 µs: under the limit
		res.Plan.ConnectionRate, res.Plan.RequestsPerConnection = true, 0
		res.Counters.Requests, res.Counters.Status, res.Counters.Issued, res.Counters.Errors = 0, nil, 10, map[string]int64{"tls": 10}
		res.Counters.ConnectionsOpened, res.Counters.Unsent, res.Counters.Missed = 985, 5, c.missed
		hl := hist.New()
		res.Histograms.Latency, res.Histograms.OkLatency = hl.EncodeV2(), hl.EncodeV2()
		for _, pt := range res.Timeline {
			pt.Requests, pt.Latency = 0, hl.EncodeV2()
		}
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d of 1000 scheduled connection starts (%.1f %%) started over 5.00ms late or never (%d late, 5 never sent)", c.missed, float64(c.missed)/10, c.missed-5)
		if r.ClientBound != c.bound || c.bound && !strings.Contains(strings.Join(r.ClientBoundReasons, "|"), want) {
			t.Errorf("missed %d: client-bound %v %q; want %v, %q", c.missed, r.ClientBound, r.ClientBoundReasons, c.bound, want)
		}
	}
}

// TestConnectionRateServerBoundHeldStarts: a connection rate whose 20
// starts the server held in their handshakes until the window's end (no
// connection opened; each ticket's first request issued and in flight)
// and 20 more never started is judged against the 40 starts scheduled,
// the 20 never started said apart; the trial read "20 of 20".
func TestConnectionRateServerBoundHeldStarts(t *testing.T) {
	res := openResult(t, 40)
	res.Agents[0].CpuTime = durationpb.New(200 * time.Millisecond)
	res.Plan.ConnectionRate, res.Plan.RequestsPerConnection = true, 1
	res.Counters.Requests, res.Counters.Status, res.Counters.Errors = 0, nil, nil
	res.Counters.Issued, res.InFlight, res.Counters.ConnectionsOpened = 20, 20, 0
	res.Counters.Missed, res.Counters.Backlogged, res.Counters.Unsent = 20, 20, 20
	hl := hist.New()
	res.Histograms.Latency, res.Histograms.OkLatency = hl.EncodeV2(), hl.EncodeV2()
	for _, pt := range res.Timeline {
		pt.Requests, pt.Latency = 0, hl.EncodeV2()
	}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	want := "20 of 40 scheduled connection starts (50.0 %) found every connection busy (20 unsent)"
	if !r.ServerBound || len(r.ServerBoundReasons) != 1 || !strings.HasPrefix(r.ServerBoundReasons[0], want) {
		t.Errorf("server-bound %v %q, want a reason starting %q", r.ServerBound, r.ServerBoundReasons, want)
	}
}

// TestConnectionRateHeader: the header printed when a --cps run starts
// names the connection rate and the --max-open bound, never -c's count.
func TestConnectionRateHeader(t *testing.T) {
	for _, c := range []struct {
		h    report.Header
		want string
	}{
		{report.Header{Target: "https://x/", Duration: 10 * time.Second, Agents: 2, Connections: 10, ConnectionRate: true, CPS: 500, MaxOpen: 500},
			"Running 10s test @ https://x/\n  2 agents, target 500.00 connections/sec, at most 500 connections open at once (--max-open)\n"},
		{report.Header{Target: "https://x/", Duration: 10 * time.Second, Agents: 1, Connections: 10, ConnectionRate: true},
			"Running 10s test @ https://x/\n  1 agent, a staged connection rate (connections/sec), no bound on connections open at once\n"},
		{report.Header{Target: "https://x/", Duration: 10 * time.Second, Agents: 1, Connections: 10},
			"Running 10s test @ https://x/\n  1 agent and 10 connections\n"},
	} {
		var b strings.Builder
		if err := report.WriteHeader(&b, c.h); err != nil || b.String() != c.want {
			t.Errorf("WriteHeader(%+v) = %q, %v; want %q", c.h, b.String(), err, c.want)
		}
	}
}

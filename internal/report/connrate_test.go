package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestConnectionRateReported: a connection-rate result's report gives the
// target and achieved connections/s, in the text and the JSON model, and
// no requests/s target; its timeline, each interval's and agent's rate.
func TestConnectionRateReported(t *testing.T) {
	res := openResult(t, 40)
	res.Plan.ConnectionRate, res.Plan.RequestsPerConnection = true, 2
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
	for _, want := range []string{"connection rate at 500 connections/sec target; 2 requests per connection", "Conn rate:    Target 500.00 connections/sec, achieved"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "requests/sec target") {
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

package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
	"github.com/phalanxload/phalanx/internal/plan"
)

// A connection-rate run (--cps) against a real NGINX: its access log (one
// line per request, $connection per connection) and stub_status's accepted
// connections are independent counts of the connections the tool opened.

// connRatePlan is a --cps plan of k requests per connection at rate
// connections/s for d against srv, over 2 agents.
func connRatePlan(srv *nginxtest.Server, rate int64, k int, d time.Duration) plan.Plan {
	return plan.Plan{
		URL: srv.URL(), Load: plan.OpenLoop, Rate: rate, ConnectionRate: true, RequestsPerConnection: k,
		Connections: 8, MaxConnections: 200, Duration: d, Timeout: 5 * time.Second,
		// X25519 only: the hybrid ML-KEM key share is pure Go and several
		// times slower under the race detector; the group is not under test.
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Curves: []string{"X25519"}},
	}
}

// TestNginxConnectionRateMatchesLog: --cps 100 for 3 s, one request per
// connection: NGINX logs 300 connections (± 1 %), each with one request,
// and the report's connection count and achieved rate are the log's. (The
// issue's 500/s for 10 s needs more than the 2 shared cores of CI give a
// race-detector build: there the full handshakes fall behind; make
// test-cases runs it, TestCaseCPSFullSize.)
func TestNginxConnectionRateMatchesLog(t *testing.T) {
	const rate, secs = 100, 3
	srv := nginxtest.Start(t, nginxtest.Options{Workers: 2})
	out := runCase(t, connRatePlan(srv, rate, 1, secs*time.Second), 2, 1)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	conns := map[int64]int{}
	for _, l := range lines {
		conns[l.Connection]++
	}
	cr := rep.ConnectionRate
	if cr == nil {
		t.Fatal("report has no connection_rate")
	}
	t.Logf("report: %d connections, %.2f/s (target %.0f), %d requests, missed %d, unsent %d, errors %v, in flight %d; nginx: %d lines, %d connections; connect %+v tls %+v latency %+v",
		cr.Connections, cr.CPS, cr.TargetCPS, rep.Requests, rep.Missed, rep.Unsent, rep.Errors, rep.InFlight, len(lines), len(conns), rep.ConnectUs, rep.TLSHandshakeFullUs, rep.Latency)
	if rep.ErrorTotal() != 0 {
		t.Errorf("errors %v: want none", rep.Errors)
	}
	if want := float64(rate * secs); math.Abs(float64(len(conns))-want) > want/100 {
		t.Errorf("nginx logged %d connections, want %.0f ± 1 %%", len(conns), want)
	}
	if cr.Connections != int64(len(conns)) || rep.ConnectionsOpened != cr.Connections {
		t.Errorf("connections: report %d (opened %d), nginx %d: want equal", cr.Connections, rep.ConnectionsOpened, len(conns))
	}
	if want := float64(len(conns)) / rep.DurationS; math.Abs(cr.CPS-want) > 1e-9 {
		t.Errorf("achieved %.3f connections/s, nginx's %d over %.3f s is %.3f", cr.CPS, len(conns), rep.DurationS, want)
	}
	if rep.Requests+rep.InFlight != int64(len(lines)) {
		t.Errorf("requests %d + in flight %d, nginx logged %d", rep.Requests, rep.InFlight, len(lines))
	}
	for c, n := range conns {
		if n != 1 {
			t.Errorf("nginx connection %d served %d requests, want 1", c, n)
			break
		}
	}
	var tl int64
	for _, pt := range rep.Timeline {
		tl += pt.Connections
		if len(pt.AgentCPS) != 2 {
			t.Errorf("timeline point %d: %d agents' rates, want 2", pt.Index, len(pt.AgentCPS))
		}
	}
	if tl != cr.Connections {
		t.Errorf("timeline's connections add up to %d, report %d", tl, cr.Connections)
	}
}

// TestNginxConnectionRateHandshakeOnly: --requests-per-connection 0 sends
// nothing: NGINX logs no request and accepts exactly the connections, each
// a full handshake, that the report counts.
func TestNginxConnectionRateHandshakeOnly(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{Server: "        location = /status { stub_status; access_log off; }\n"})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: srv.ClientTLSConfig(), DisableKeepAlives: true}}
	before := stubAccepts(t, client, srv)
	out := runCase(t, connRatePlan(srv, 200, 0, 2*time.Second), 2, 1)
	after := stubAccepts(t, client, srv)
	rep := out.Report
	// The second status request's own connection is in after.
	accepted := after - before - 1
	t.Logf("report: %d connections, %+v handshakes, errors %v; nginx accepted %d", rep.ConnectionsOpened, rep.Handshakes, rep.Errors, accepted)
	if rep.ErrorTotal() != 0 || rep.Requests != 0 || rep.Issued != 0 {
		t.Errorf("errors %v, requests %d, issued %d: want none", rep.Errors, rep.Requests, rep.Issued)
	}
	if rep.ConnectionsOpened != accepted || rep.Handshakes.Full != accepted {
		t.Errorf("report: %d connections, %d full handshakes; nginx accepted %d", rep.ConnectionsOpened, rep.Handshakes.Full, accepted)
	}
	if rep.ConnectionsOpened+rep.Unsent != 400 {
		t.Errorf("connections %d + unsent %d: want the 400 scheduled", rep.ConnectionsOpened, rep.Unsent)
	}
	if lines := srv.WaitLogStable(t, 0); len(lines) != 0 {
		t.Errorf("nginx logged %d requests, want none", len(lines))
	}
}

// stubAccepts returns stub_status's accepted connections.
func stubAccepts(t *testing.T, c *http.Client, srv *nginxtest.Server) int64 {
	t.Helper()
	resp, err := c.Get(srv.URL() + "status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var active, accepts, handled, requests int64
	if _, err := fmt.Sscanf(string(b), "Active connections: %d \nserver accepts handled requests\n %d %d %d", &active, &accepts, &handled, &requests); err != nil {
		t.Fatalf("stub_status %q: %v", b, err)
	}
	return accepts
}

// TestNginxResumeRatioMatchesLog: --cps with --resume-ratio 0.7, one
// request per connection: NGINX's resumed share ($ssl_session_reused) is
// 70 % ± 2 %, and the report's resumed and full handshakes are the log's
// exactly; a handshake not offered a session is never resumed.
func TestNginxResumeRatioMatchesLog(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{Workers: 2})
	p := connRatePlan(srv, 150, 1, 3*time.Second)
	p.TLS.Resume, p.TLS.ResumeRatio = true, 0.7
	out := runCase(t, p, 2, 1)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	var reused int64
	for _, l := range lines {
		if l.SessionReused {
			reused++
		}
	}
	h := rep.Handshakes
	t.Logf("report: %d connections, handshakes %+v, errors %v, unsent %d; nginx: %d lines, %d reused", rep.ConnectionsOpened, h, rep.Errors, rep.Unsent, len(lines), reused)
	if rep.ErrorTotal() != 0 || int64(len(lines)) != rep.ConnectionsOpened {
		t.Errorf("errors %v; nginx logged %d requests for %d connections", rep.Errors, len(lines), rep.ConnectionsOpened)
	}
	if h.Resumed != reused || h.Full != int64(len(lines))-reused {
		t.Errorf("report: %d resumed, %d full; nginx: %d reused of %d", h.Resumed, h.Full, reused, len(lines))
	}
	if share := float64(reused) / float64(len(lines)); math.Abs(share-0.7) > 0.02 {
		t.Errorf("nginx resumed %.3f of the handshakes, want 0.70 ± 0.02", share)
	}
	n := float64(h.Full + h.Resumed)
	if h.ResumeRatioPlanned != 0.7 || h.ResumeRatioOffered == nil || *h.ResumeRatioOffered != float64(h.Offered)/n || h.Offered != h.Resumed+h.Refused ||
		math.Abs(h.ResumeRatioAchieved-float64(reused)/float64(len(lines))) > 1e-12 {
		t.Errorf("ratios: planned %v, offered %v (%d), achieved %v", h.ResumeRatioPlanned, h.ResumeRatioOffered, h.Offered, h.ResumeRatioAchieved)
	}
}

// TestNginxCloseResetLeavesNoTimeWait: a connection-rate run closing by
// FIN leaves the client's sockets to NGINX's port in TIME_WAIT (the
// control); with --close rst (SO_LINGER 0) none is left, and the report
// says how connections closed.
func TestNginxCloseResetLeavesNoTimeWait(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("ss (iproute2) not installed")
	}
	for _, rst := range []bool{false, true} {
		srv := nginxtest.Start(t, nginxtest.Options{})
		p := connRatePlan(srv, 100, 1, time.Second)
		p.CloseReset = rst
		rep := runCase(t, p, 1, 1).Report
		// The client's side of a connection to NGINX has NGINX's port as
		// its destination.
		out, err := exec.Command("ss", "-Htan", "state", "time-wait", fmt.Sprintf("( dport = :%d )", srv.Port())).Output()
		if err != nil {
			t.Fatal(err)
		}
		tw := len(strings.Fields(string(out))) / 4 // Recv-Q Send-Q Local Peer
		t.Logf("close rst %v: %d connections, %d in TIME_WAIT on the client side, report close %q", rst, rep.ConnectionsOpened, tw, rep.Close)
		switch {
		case rep.ConnectionsOpened < 50:
			t.Errorf("close rst %v: %d connections opened, want 100", rst, rep.ConnectionsOpened)
		case rst && (tw != 0 || rep.Close != "rst"):
			t.Errorf("--close rst: %d client sockets in TIME_WAIT, report close %q: want none, rst", tw, rep.Close)
		case !rst && (tw == 0 || rep.Close != "fin"):
			t.Errorf("--close fin: %d client sockets in TIME_WAIT, report close %q: want some (the client closes first), fin", tw, rep.Close)
		}
	}
}

// TestNginxSourceIPsSpread: --source-ips 127.0.0.2,127.0.0.3 binds the
// connections to both, alternately: NGINX's $remote_addr holds only them,
// in halves.
func TestNginxSourceIPsSpread(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{})
	p := connRatePlan(srv, 100, 1, time.Second)
	p.SourceIPs = []string{"127.0.0.2", "127.0.0.3"}
	rep := runCase(t, p, 1, 1).Report
	lines := srv.WaitLogStable(t, 0)
	from := map[string]int{}
	for _, l := range lines {
		from[l.RemoteAddr]++
	}
	t.Logf("report: %d connections, errors %v; nginx: %d lines from %v", rep.ConnectionsOpened, rep.Errors, len(lines), from)
	if rep.ErrorTotal() != 0 || len(lines) == 0 || int64(len(lines)) != rep.ConnectionsOpened {
		t.Fatalf("errors %v, nginx logged %d for %d connections", rep.Errors, len(lines), rep.ConnectionsOpened)
	}
	a, b := from["127.0.0.2"], from["127.0.0.3"]
	if a+b != len(lines) || a-b > 1 || b-a > 1 {
		t.Errorf("nginx saw connections from %v: want only 127.0.0.2 and 127.0.0.3, alternately", from)
	}
}

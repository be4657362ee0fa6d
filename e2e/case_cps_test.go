package e2e

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestCaseCPSFullSize is issue 13's NGINX check at full size: --cps 500 for
// 10 s (5,000 connections) over 2 agents against NGINX (2 workers), with
// its access log ($connection, $ssl_session_reused) and stub_status as the
// independent counts:
//   - a_one_request: NGINX logs 5,000 ± 1 % connections, each with one
//     request; the report's connection count is the log's and its achieved
//     CPS the log's over the window, exactly;
//   - b_handshake_only (--requests-per-connection 0): NGINX accepted (and
//     handshook) exactly the report's connections, 5,000 ± 1 %, and logged
//     no request;
//   - c_resume_70 (--resume-ratio 0.7): NGINX's resumed share is 70 % ± 2 %
//     and the report's resumed and full handshakes are the log's exactly.
//
// The exact equalities hold whatever the machine's load. The 5,000 ± 1 %
// needs a machine that holds 500 full handshakes/s beside NGINX's: when the
// count falls short and the report says why (client-bound: the agents were
// the limit; server-bound: NGINX, on the same cores, was), the test says
// so and skips that bound; short without either is a failure. The race
// detector makes every handshake several times dearer, so there the sizes
// are judged by make test-cases alone (TestNginxConnectionRate* run the
// 100/s checks under it).
func TestCaseCPSFullSize(t *testing.T) {
	if c15RaceEnabled() {
		t.Skip("the full-size connection rate is judged without the race detector (make test-cases); TestNginxConnectionRateMatchesLog and TestNginxResumeRatioMatchesLog check 100/s and 150/s here")
	}
	const rate, secs, want = 500, 10, 5000
	// judge fails t for each problem, except where the report explains
	// it: the 5,000 ± 1 % (size) when the run was client- or server-bound,
	// and the exact counts (exact) when, besides, requests failed (a
	// request that timed out at the client may or may not be in NGINX's
	// log). Explained problems skip the test, saying so.
	judge := func(t *testing.T, r *report.Report, exact, size []string) {
		t.Helper()
		var why string
		switch {
		case r.ClientBound:
			why = "the run was client-bound (" + strings.Join(r.ClientBoundReasons, "; ") + "): this machine did not hold 500 connections/s"
		case r.ServerBound:
			why = "the run was server-bound (" + strings.Join(r.ServerBoundReasons, "; ") + "): NGINX, on the same cores, did not keep up"
		}
		var explained []string
		if why != "" && r.ErrorTotal() > 0 {
			explained, exact = append(explained, exact...), nil
		}
		if why != "" {
			explained, size = append(explained, size...), nil
		}
		for _, p := range append(exact, size...) {
			t.Error(p)
		}
		if len(explained) > 0 && !t.Failed() {
			t.Skipf("%s; so not judged: %s", why, strings.Join(explained, "; "))
		}
	}
	sized := func(what string, got int64) []string {
		if math.Abs(float64(got-want)) <= want/100 {
			return nil
		}
		return []string{fmt.Sprintf("%s %d, want %d ± 1 %%", what, got, want)}
	}
	noErrors := func(r *report.Report) []string {
		if r.ErrorTotal() == 0 {
			return nil
		}
		return []string{fmt.Sprintf("errors %v: want none", r.Errors)}
	}
	t.Run("a_one_request", func(t *testing.T) {
		srv := nginxtest.Start(t, nginxtest.Options{Workers: 2})
		p := connRatePlan(srv, rate, 1, secs*time.Second)
		p.MaxConnections = 1000
		r := runCase(t, p, 2, 1).Report
		lines := srv.WaitLogStable(t, 0)
		conns := map[int64]int{}
		for _, l := range lines {
			conns[l.Connection]++
		}
		cr := r.ConnectionRate
		t.Logf("report: %d connections, %.2f/s, %d requests, in flight %d, missed %d, unsent %d, growth refused %d, errors %v, client-bound %v %q; handshake latency %+v; nginx: %d lines, %d connections",
			cr.Connections, cr.CPS, r.Requests, r.InFlight, r.Missed, r.Unsent, r.GrowthRefused, r.Errors, r.ClientBound, r.ClientBoundReasons, r.HandshakeLatencyUs, len(lines), len(conns))
		exact := noErrors(r)
		if cr.Connections != int64(len(conns)) || r.ConnectionsOpened != cr.Connections {
			exact = append(exact, fmt.Sprintf("connections: report %d (opened %d), nginx %d: want equal", cr.Connections, r.ConnectionsOpened, len(conns)))
		}
		if w := float64(len(conns)) / r.DurationS; math.Abs(cr.CPS-w) > 1e-9 {
			exact = append(exact, fmt.Sprintf("achieved %.3f connections/s, nginx's %d over %.3f s is %.3f", cr.CPS, len(conns), r.DurationS, w))
		}
		if r.Requests+r.InFlight != int64(len(lines)) {
			exact = append(exact, fmt.Sprintf("requests %d + in flight %d, nginx logged %d", r.Requests, r.InFlight, len(lines)))
		}
		for c, n := range conns {
			if n != 1 {
				t.Errorf("nginx connection %d served %d requests, want 1", c, n)
				break
			}
		}
		if h := r.HandshakeLatencyUs; h == nil || h.Count != cr.Connections {
			t.Errorf("handshake latency %+v: want one sample per connection (%d)", h, cr.Connections)
		}
		judge(t, r, exact, sized("nginx logged connections", int64(len(conns))))
	})
	t.Run("b_handshake_only", func(t *testing.T) {
		srv := nginxtest.Start(t, nginxtest.Options{Workers: 2, Server: "        location = /status { stub_status; access_log off; }\n"})
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: srv.ClientTLSConfig(), DisableKeepAlives: true}}
		before := stubAccepts(t, client, srv)
		p := connRatePlan(srv, rate, 0, secs*time.Second)
		p.MaxConnections = 1000
		r := runCase(t, p, 2, 1).Report
		accepted := stubAccepts(t, client, srv) - before - 1 // the second status request's own connection
		t.Logf("report: %d connections, handshakes %+v, missed %d, unsent %d, errors %v, client-bound %v %q; nginx accepted %d",
			r.ConnectionsOpened, r.Handshakes, r.Missed, r.Unsent, r.Errors, r.ClientBound, r.ClientBoundReasons, accepted)
		if r.Requests != 0 || r.Issued != r.ErrorTotal() {
			t.Errorf("requests %d, issued %d, errors %d: want no request, only failed opens issued", r.Requests, r.Issued, r.ErrorTotal())
		}
		exact := noErrors(r)
		if r.ConnectionsOpened != accepted || r.Handshakes.Full != accepted {
			exact = append(exact, fmt.Sprintf("report: %d connections, %d full handshakes; nginx accepted %d", r.ConnectionsOpened, r.Handshakes.Full, accepted))
		}
		if lines := srv.WaitLogStable(t, 0); len(lines) != 0 {
			t.Errorf("nginx logged %d requests, want none", len(lines))
		}
		judge(t, r, exact, sized("nginx accepted connections", accepted))
	})
	t.Run("c_resume_70", func(t *testing.T) {
		srv := nginxtest.Start(t, nginxtest.Options{Workers: 2})
		p := connRatePlan(srv, rate, 1, secs*time.Second)
		p.MaxConnections = 1000
		p.TLS.Resume, p.TLS.ResumeRatio = true, 0.7
		r := runCase(t, p, 2, 1).Report
		lines := srv.WaitLogStable(t, 0)
		var reused int64
		for _, l := range lines {
			if l.SessionReused {
				reused++
			}
		}
		h := r.Handshakes
		t.Logf("report: %d connections, handshakes %+v, missed %d, unsent %d, errors %v, client-bound %v; nginx: %d lines, %d reused",
			r.ConnectionsOpened, h, r.Missed, r.Unsent, r.Errors, r.ClientBound, len(lines), reused)
		exact := noErrors(r)
		if int64(len(lines)) != r.ConnectionsOpened {
			exact = append(exact, fmt.Sprintf("nginx logged %d requests for %d connections", len(lines), r.ConnectionsOpened))
		}
		if h.Resumed != reused || h.Full != int64(len(lines))-reused {
			exact = append(exact, fmt.Sprintf("report: %d resumed, %d full; nginx: %d reused of %d", h.Resumed, h.Full, reused, len(lines)))
		}
		// The share is the engine's offer schedule and the server's
		// answers, whatever the rate: judged always.
		if share := h.ResumeRatioAchieved; math.Abs(share-0.7) > 0.02 {
			t.Errorf("resumed %.4f of the %d handshakes, want 0.70 ± 0.02", share, h.Full+h.Resumed)
		}
		if share := float64(reused) / float64(len(lines)); math.Abs(share-0.7) > 0.02 {
			exact = append(exact, fmt.Sprintf("nginx resumed %.4f of the %d handshakes it logged, want 0.70 ± 0.02", share, len(lines)))
		}
		judge(t, r, exact, sized("nginx logged connections", int64(len(lines))))
	})
}

package e2e

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestOKFiguresApart: a target that answers three requests in four with
// an immediate 503 and the fourth with a 200 after 5 ms (an overloaded
// server shedding load). The success figures (ok_latency_us, ok_requests,
// ok_rps) hold the 200s only: their p50 is at least the 5 ms delay, their
// count is the server's count of 200s; the all-responses figures keep
// every response (their p50 is a fast 503's), over HTTP/1.1 and HTTP/2.
func TestOKFiguresApart(t *testing.T) {
	const total, slow = 400, 5 * time.Millisecond
	for _, proto := range []plan.Protocol{plan.H1, plan.H2} {
		t.Run(proto.String(), func(t *testing.T) {
			var n, ok, shed atomic.Int64
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if n.Add(1)%4 != 0 {
					shed.Add(1)
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				time.Sleep(slow)
				ok.Add(1)
				_, _ = w.Write([]byte("ok"))
			}))
			ts.EnableHTTP2 = proto == plan.H2
			ts.TLS = &tls.Config{Certificates: []tls.Certificate{testCA(t).Cert}}
			ts.StartTLS()
			t.Cleanup(ts.Close)
			r := runCase(t, plan.Plan{URL: ts.URL + "/", Connections: 4, Requests: total, Protocol: proto}, 1, 2).Report
			if f := agentFailures(r); f != "" {
				t.Fatalf("agent failures: %s", f)
			}
			t.Logf("status %v; all: p50 %d us, rps %.0f; ok: %d, p50 %+v, rps %.0f", r.Status, r.Latency.P50, r.RPS, r.OKRequests, r.OKLatency, r.OKRPS)
			if r.Requests != total || r.Status["200"] != ok.Load() || r.Status["503"] != shed.Load() {
				t.Fatalf("completed %d, status %v: want %d, 200 ×%d and 503 ×%d as the server counted", r.Requests, r.Status, total, ok.Load(), shed.Load())
			}
			if r.OKRequests != ok.Load() || r.Non2xx3xx != shed.Load() {
				t.Errorf("ok_requests %d, non_2xx_3xx %d: want %d, %d", r.OKRequests, r.Non2xx3xx, ok.Load(), shed.Load())
			}
			if s := r.OKLatency; s == nil || s.Count != ok.Load() || s.Min < slow.Microseconds() || s.P50 < slow.Microseconds() {
				t.Errorf("ok latency %+v: want %d samples, each at least %v", s, ok.Load(), slow)
			}
			if r.Latency == nil || r.Latency.Count != total || r.Latency.P50 >= slow.Microseconds() {
				t.Errorf("latency %+v: want all %d responses, p50 a fast 503's (below %v)", r.Latency, total, slow)
			}
			if want := float64(r.OKRequests) / r.DurationS; r.OKRPS != want || r.OKRPS >= r.RPS {
				t.Errorf("ok_rps %.2f: want ok_requests / duration = %.2f, below rps %.2f", r.OKRPS, want, r.RPS)
			}
		})
	}
}

package engine

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/h3test"
	"github.com/phalanxload/phalanx/internal/plan"
)

// BenchmarkH3VsH2CPU prints the process CPU per request (client and
// in-process server together, µs) of closed-loop HTTP/3 (quic-go's client
// and server) beside HTTP/2 (the engine's client, net/http's server over
// TLS), each on 1 connection with 1 request at a time and with 4 (-m 4:
// request streams), b.N GETs of an 11-byte body in count mode, and the
// wall time per request. Figures only:
// the servers differ (quic-go's http3 against net/http's HTTP/2), so the
// ratio is of the two stacks as a whole on loopback, not of the clients
// alone. Run with -benchtime=20000x -count=N, the two interleaved.
func BenchmarkH3VsH2CPU(b *testing.B) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(hello))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	b.Cleanup(ts.Close)
	cert := ts.TLS.Certificates[0]
	ca := pemCert(ts.Certificate().Raw)
	h3 := h3test.Start(b, cert, http.HandlerFunc(hello))
	for _, tc := range []struct {
		name string
		p    plan.Plan
	}{
		{"h3", plan.Plan{URL: h3.URL + "/", Protocol: plan.H3}},
		{"h2", plan.Plan{URL: ts.URL + "/", Protocol: plan.H2}},
		{"h3-m4", plan.Plan{URL: h3.URL + "/", Protocol: plan.H3, MaxStreams: 4}},
		{"h2-m4", plan.Plan{URL: ts.URL + "/", Protocol: plan.H2, MaxStreams: 4}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := tc.p
			n := max(b.N, 1)
			p.Connections, p.Requests, p.Timeout, p.TLS = 1, int64(n), 10*time.Second, plan.TLS{CAPEM: ca}
			_, cpu := benchRun(b, p)
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-us/req")
		})
	}
}

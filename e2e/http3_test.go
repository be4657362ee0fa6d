package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/h3test"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestHTTP3CountsMatchServer runs HTTP/3 plans through a cluster of two
// agents against a quic-go HTTP/3 server (internal/h3test) and compares
// the report with the server's own counts, exactly: the requests issued
// (completed, errors and in flight at the window's end) are the requests
// it handled, and the connections opened are the QUIC connections it
// accepted, each a full TLS 1.3 handshake over QUIC v1 with ALPN h3. In
// closed loop, open loop (-R), with -m 4 request streams per connection
// in both and in count mode (-n), and at a connection rate (--cps).
func TestHTTP3CountsMatchServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    plan.Plan
	}{
		{"closed", plan.Plan{Connections: 4, Duration: time.Second}},
		{"open", plan.Plan{Connections: 2, MaxConnections: 8, Duration: time.Second, Load: plan.OpenLoop, Rate: 200}},
		{"closed-m4", plan.Plan{Connections: 4, MaxStreams: 4, Duration: time.Second}},
		{"open-m4", plan.Plan{Connections: 2, MaxStreams: 4, Duration: time.Second, Load: plan.OpenLoop, Rate: 200}},
		{"count-m4", plan.Plan{Connections: 4, MaxStreams: 4, Requests: 400}},
		{"cps", plan.Plan{Connections: 2, MaxConnections: 20, Duration: time.Second, Load: plan.OpenLoop, Rate: 50, ConnectionRate: true, RequestsPerConnection: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := h3test.Start(t, testCA(t).Cert, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
			p := tc.p
			p.URL, p.Protocol = s.URL+"/", plan.H3
			r := runCase(t, p, 2, 1).Report
			if f := agentFailures(r); f != "" {
				t.Fatalf("agent failures: %s", f)
			}
			t.Logf("%d requests, %d in flight, %d errors %v, %d connections, tls %+v", r.Requests, r.InFlight, r.ErrorTotal(), r.Errors, r.ConnectionsOpened, r.TLS)
			if r.Issued != s.Requests.Load() || r.Requests == 0 {
				t.Errorf("issued %d (completed %d): the server handled %d", r.Issued, r.Requests, s.Requests.Load())
			}
			if !h3test.WaitFor(func() bool { return s.Conns.Load() >= r.ConnectionsOpened }) || s.Conns.Load() != r.ConnectionsOpened {
				t.Errorf("connections opened %d: the server accepted %d", r.ConnectionsOpened, s.Conns.Load())
			}
			if r.Handshakes.Full != r.ConnectionsOpened || r.TLS.Transport["QUIC v1"] != r.ConnectionsOpened || r.TLS.ALPN["h3"] != r.ConnectionsOpened {
				t.Errorf("handshakes %+v, TLS %+v: want %d full over QUIC v1 with ALPN h3", r.Handshakes, r.TLS, r.ConnectionsOpened)
			}
			if !r.HTTP3 {
				t.Errorf("the report does not say HTTP/3")
			}
			if tc.p.MaxStreams > 1 && r.ConnectionsOpened != int64(tc.p.Connections) {
				t.Errorf("connections opened %d: want -c (%d), each carrying -m %d streams", r.ConnectionsOpened, tc.p.Connections, tc.p.MaxStreams)
			}
			if n := tc.p.Requests; n > 0 && (r.Requests != n || s.Requests.Load() != n) {
				t.Errorf("requests %d, server handled %d: want the count, %d", r.Requests, s.Requests.Load(), n)
			}
			if cr := r.ConnectionRate; tc.p.ConnectionRate && (cr == nil || cr.Connections != s.Conns.Load()) {
				t.Errorf("connection rate %+v: want the server's %d connections", cr, s.Conns.Load())
			}
		})
	}
}

// TestHTTP3EarlyDataMatchesServer runs a connection-rate HTTP/3 plan with
// resumption and early data through two agents against a quic-go server,
// and compares the coordinator's merged counts with the server's exactly:
// 0-RTT accepted handshakes are the requests it received in 0-RTT,
// resumed handshakes its resumed ones, issued requests the requests it
// handled. Against the same server rejecting 0-RTT, every offer is
// counted rejected and every request still reaches it once.
func TestHTTP3EarlyDataMatchesServer(t *testing.T) {
	skip0RTTUnderRace(t)
	for _, reject := range []bool{false, true} {
		s := h3test.Start(t, testCA(t).Cert, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
		s.Reject0RTT.Store(reject)
		p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxConnections: 20, Duration: time.Second, Load: plan.OpenLoop, Rate: 50,
			ConnectionRate: true, RequestsPerConnection: 1, TLS: plan.TLS{Resume: true, EarlyData: true}}
		r := runCase(t, p, 2, 1).Report
		if f := agentFailures(r); f != "" {
			t.Fatalf("reject %v: agent failures: %s", reject, f)
		}
		h := r.Handshakes
		t.Logf("reject %v: latency %+v, in flight %d", reject, r.Latency, r.InFlight)
		t.Logf("reject %v: %d requests, errors %v, handshakes %+v; server: %d requests, %d resumed, %d early requests", reject, r.Requests, r.Errors, h,
			s.Requests.Load(), s.Resumed.Load(), s.EarlyRequests.Load())
		if r.Issued != s.Requests.Load() || r.Requests == 0 || r.ErrorTotal() != 0 {
			t.Errorf("reject %v: issued %d (completed %d, errors %v): the server handled %d", reject, r.Issued, r.Requests, r.Errors, s.Requests.Load())
		}
		// Rejected, the server may not see the end of a handshake whose
		// connection closes right after it (TestHTTP3EarlyDataRejected).
		h3test.WaitFor(func() bool { return s.Resumed.Load() >= h.Resumed && s.EarlyRequests.Load() >= h.EarlyAccepted })
		if s.EarlyRequests.Load() != h.EarlyAccepted || s.Resumed.Load() > h.Resumed || (!reject && s.Resumed.Load() != h.Resumed) {
			t.Errorf("reject %v: %d resumed, %d 0-RTT accepted: the server resumed %d, received %d requests in 0-RTT", reject, h.Resumed, h.EarlyAccepted, s.Resumed.Load(), s.EarlyRequests.Load())
		}
		if h.EarlyOffered == 0 || h.EarlyRejected != h.EarlyOffered-h.EarlyAccepted || (reject && h.EarlyAccepted != 0) || (!reject && h.EarlyRejected != 0) {
			t.Errorf("reject %v: 0-RTT %d offered, %d accepted, %d rejected", reject, h.EarlyOffered, h.EarlyAccepted, h.EarlyRejected)
		}
	}
}

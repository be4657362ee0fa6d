package e2e

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC22TLSResumption: C22, TLS session resumption on short
// connections.
//
// In the field, wrk could not resume TLS sessions at all and ab never
// cached them, so every short-connection benchmark paid a full handshake
// per request and measured the server's key exchange rather than what
// clients with session caches would cost it, and neither tool's output said
// whether resumption had happened.
//
// With one request per connection, c=4, N=2000, against a server that logs
// full and resumed handshakes, every run must show N connections and N
// handshakes, and the tool's full and resumed counts must equal the
// server's exactly. With resumption on and tickets on the server (TLS 1.3,
// and TLS 1.2 tickets), only the first handshake of each connection slot
// (each worker's session cache) may be full, so resumed >= 2000 - 4, and
// handshake times are reported separately for full and resumed handshakes.
// With resumption off in the tool, or tickets off on the server, resumed is
// 0 on both sides and the report says so.
func TestCaseC22TLSResumption(t *testing.T) {
	const conns = 4
	// The runs without resumption have N=500 instead of 2000: their
	// assertions (resumed = 0 on both sides, one full handshake per
	// connection) do not depend on N, and full handshakes are slow under
	// the race detector.
	runs := []struct {
		name          string
		n             int64
		resume        bool // tool
		serverTickets bool
		tls12         bool // server and tool limited to TLS 1.2
		wantResumed   bool
	}{
		{"a_resume", 2000, true, true, false, true},
		{"b_tool_resume_off", 500, false, true, false, false},
		{"c_server_tickets_off", 500, true, false, false, false},
		{"tls12_resume", 2000, true, true, true, true},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			n := r.n
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, SessionTicketsDisabled: !r.serverTickets}
			p := plan.Plan{
				Connections: conns, Requests: n, NoKeepAlive: true, Timeout: 5 * time.Second,
				// X25519 only: the hybrid ML-KEM key share is pure Go and several
				// times slower under the race detector; the group is not under test.
				TLS: plan.TLS{Resume: r.resume, Curves: []string{"X25519"}},
			}
			wantVersion := "TLS 1.3"
			if r.tls12 {
				cfg.MaxVersion = tls.VersionTLS12
				p.TLS.MaxVersion = "1.2"
				wantVersion = "TLS 1.2"
			}
			srv := startRaw(t, cfg, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
				for {
					if _, _, err := readRequest(br, st); err != nil {
						return
					}
					if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
						return
					}
				}
			})
			p.URL = srv.URL("/")
			// Two workers: two session caches for the four slots.
			out := runCase(t, p, 1, 2)
			rep := out.Report
			sFull, sResumed := srv.Stats.HandshakesFull.Load(), srv.Stats.HandshakesResumed.Load()
			t.Logf("%s: %d requests in %v, connections %d, handshakes %+v (server: %d full, %d resumed), versions %v",
				r.name, rep.Requests, out.Elapsed, rep.ConnectionsOpened, rep.Handshakes, sFull, sResumed, rep.TLS.Version)

			if rep.ErrorTotal() != 0 || rep.Requests != n || rep.Status["200"] != n || rep.InFlight != 0 {
				t.Errorf("completed %d, status %v, errors %v, in flight %d: want %d x 200 and no error", rep.Requests, rep.Status, rep.Errors, rep.InFlight, n)
			}
			if rep.ConnectionsOpened != n || srv.Stats.Accepted.Load() != n {
				t.Errorf("connections: report %d, server accepted %d, want %d", rep.ConnectionsOpened, srv.Stats.Accepted.Load(), n)
			}
			if got := rep.Handshakes.Full + rep.Handshakes.Resumed; got != n || sFull+sResumed != n {
				t.Errorf("handshakes: report %+v (%d), server %d full + %d resumed: want %d", rep.Handshakes, got, sFull, sResumed, n)
			}
			if rep.Handshakes.Resumed != sResumed || rep.Handshakes.Full != sFull {
				t.Errorf("report handshakes %+v, server %d full, %d resumed: want equal", rep.Handshakes, sFull, sResumed)
			}
			if rep.TLS.Version[wantVersion] != n {
				t.Errorf("TLS versions %v, want %s on all %d connections", rep.TLS.Version, wantVersion, n)
			}
			full, resumed := rep.TLSHandshakeFullUs, rep.TLSHandshakeResumedUs
			if r.wantResumed {
				if rep.Handshakes.Resumed < n-conns {
					t.Errorf("resumed %d, want at least %d (only the first handshake per connection slot may be full)", rep.Handshakes.Resumed, n-conns)
				}
				if full == nil || resumed == nil {
					t.Fatalf("handshake time summaries: full %v, resumed %v: want both", full, resumed)
				}
				if full.Count != rep.Handshakes.Full || resumed.Count != rep.Handshakes.Resumed {
					t.Errorf("handshake time samples: full %d, resumed %d; handshakes %+v", full.Count, resumed.Count, rep.Handshakes)
				}
				if resumed.Max <= 0 || full.Max <= 0 {
					t.Errorf("handshake times: full %+v, resumed %+v", *full, *resumed)
				}
				t.Logf("handshake µs: full p50 %d (n=%d), resumed p50 %d (n=%d)", full.P50, full.Count, resumed.P50, resumed.Count)
			} else {
				if rep.Handshakes.Resumed != 0 || sResumed != 0 {
					t.Errorf("resumed: report %d, server %d: want 0 on both sides", rep.Handshakes.Resumed, sResumed)
				}
				if resumed != nil {
					t.Errorf("resumed handshake times %+v, want none (no resumed handshake)", *resumed)
				}
				if full == nil || full.Count != n {
					t.Errorf("full handshake times %+v, want %d samples", full, n)
				}
			}
		})
	}
}

package e2e

import (
	"bufio"
	"crypto/tls"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC03BodilessResponses: field case C03. A load tool saw a HEAD
// response carrying the Content-Length a GET would have had and waited for
// body bytes that never come, so every HEAD hung until the server closed;
// clients fail the same way on 204 and 304 (which end at the blank line
// whatever their headers say) and on interim 1xx responses before the final
// one. What must hold: each such response completes at once with its final
// status, no timeout or other error, 1xx never counted as a response, the
// connections stay in sync and are reused (4 opened for 4 slots), and the
// wire bytes are exactly what the server wrote.
func TestCaseC03BodilessResponses(t *testing.T) {
	// Responses by request path; the status is what the tool must count.
	type endpoint struct {
		method, path string
		resp         string
		status       string
	}
	eps := []endpoint{
		// (a)-(d): the case.
		{"HEAD", "/head", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\n", "200"},
		{"GET", "/204", "HTTP/1.1 204 No Content\r\nServer: raw\r\n\r\n", "204"},
		{"GET", "/304", "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 5\r\n\r\n", "304"},
		{"GET", "/early", "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "200"},
		// Same fault, other headers: HEAD, 204 and 304 announcing a chunked
		// body they never carry, and a final response after three interim
		// ones (100 Continue and two 103) with a chunked body.
		{"HEAD", "/head-chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "200"},
		{"GET", "/204-chunked", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", "204"},
		{"GET", "/304-chunked", "HTTP/1.1 304 Not Modified\r\nETag: \"v2\"\r\nTransfer-Encoding: chunked\r\n\r\n", "304"},
		{"GET", "/interim3", "HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </a.js>; rel=preload\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "200"},
	}
	byPath := map[string]int{}
	for i, ep := range eps {
		byPath[ep.path] = i
	}

	// start serves every endpoint on keep-alive connections and tallies
	// the responses it wrote per endpoint. A request it cannot route (a
	// desynchronized connection) is answered 400 and counted apart.
	start := func(t *testing.T) (*rawServer, []atomic.Int64, *atomic.Int64) {
		served := make([]atomic.Int64, len(eps))
		var stray atomic.Int64
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				line, _, err := readRequest(br, st)
				if err != nil {
					return
				}
				f := strings.Fields(line)
				i, ok := -1, false
				if len(f) == 3 {
					i, ok = byPath[f[1]]
				}
				if !ok || eps[i].method != f[0] {
					stray.Add(1)
					_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
					return
				}
				served[i].Add(1)
				if _, err := c.Write([]byte(eps[i].resp)); err != nil {
					return
				}
			}
		})
		return srv, served, &stray
	}

	const n = 1000
	check := func(t *testing.T, p plan.Plan) []atomic.Int64 {
		srv, served, stray := start(t)
		p.URL = srv.URL(p.URL)
		for i := range p.Mix {
			p.Mix[i].URL = srv.URL(p.Mix[i].URL)
		}
		p.Connections, p.Requests, p.Timeout, p.Duration = 4, n, 5*time.Second, 15*time.Second
		run := runCase(t, p, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		wantStatus := map[string]int64{}
		var wire int64
		for i, ep := range eps {
			k := served[i].Load()
			if k > 0 {
				wantStatus[ep.status] += k
			}
			wire += k * int64(len(ep.resp))
		}
		fcWant(t, "server: requests it could not route (desync)", stray.Load(), 0)
		fcWant(t, "completed", r.Requests, n)
		fcWant(t, "issued", r.Issued, n)
		fcWantMap(t, "errors", r.Errors, nil)
		fcWantMap(t, "status", r.Status, wantStatus)
		var sum int64
		for _, v := range wantStatus {
			sum += v
		}
		fcWant(t, "server: responses written", sum, n)
		fcWant(t, "bytes read (wire, as written by the server)", r.BytesRead, wire)
		fcWant(t, "connections opened", r.ConnectionsOpened, 4)
		fcWant(t, "reconnects", r.Reconnects, 0)
		fcWant(t, "server: connections accepted", srv.Stats.Accepted.Load(), 4)
		fcLatencyComplete(t, r)
		if l := r.Latency; l != nil && l.P99 >= 50_000 {
			t.Errorf("latency p99 = %dus, want < 50ms (no response may wait for a body)", l.P99)
		}
		// A single stalled request would cost the 5 s timeout (and show as
		// an error above); the whole run must stay well below that.
		if r.DurationS >= 4 {
			t.Errorf("run took %.2fs, want well under the 5 s timeout", r.DurationS)
		}
		return served
	}

	// One run per case endpoint (a)-(d), and the HEAD-with-chunked variant.
	for _, ep := range eps[:5] {
		t.Run(ep.method+"_"+strings.TrimPrefix(ep.path, "/"), func(t *testing.T) {
			check(t, plan.Plan{URL: ep.path, Method: ep.method})
		})
	}
	// Every endpoint, variants included, on the same connections: any
	// framing slip shows as a stray request, a wrong status on the next
	// response, an error or a reconnect.
	t.Run("mixed_on_shared_connections", func(t *testing.T) {
		p := plan.Plan{URL: "/"}
		for _, ep := range eps {
			p.Mix = append(p.Mix, plan.Request{Method: ep.method, URL: ep.path})
		}
		served := check(t, p)
		for i, ep := range eps {
			if served[i].Load() == 0 {
				t.Errorf("%s %s was never requested in the mix", ep.method, ep.path)
			}
		}
	})
}

package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC02ChunkedBody: field case C02. Load tools took a chunked
// response's size from its declared length (unknown, so 0) instead of what
// they read, and stopped the clock at the headers, so a streamed body's
// transfer time went unmeasured; another miscounted bytes once a body had
// more than one chunk. What must hold: every chunked response completes with
// no error on a reused connection (the zero-size chunk ends the message),
// every byte read is counted (we count wire bytes: the exact bytes the server
// wrote, framing included), and latency runs to the last chunk, so the
// server's inter-chunk pauses are inside it.
func TestCaseC02ChunkedBody(t *testing.T) {
	t.Run("paced_chunks", func(t *testing.T) {
		// The case: three 10-byte chunks, 20 ms before the 2nd and the 3rd.
		head := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
		chunk := "a\r\n0123456789\r\n"
		last := "0\r\n\r\n"
		wire := int64(len(head) + 3*len(chunk) + len(last))
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				if _, err := c.Write([]byte(head + chunk)); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
				if _, err := c.Write([]byte(chunk)); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
				if _, err := c.Write([]byte(chunk + last)); err != nil {
					return
				}
			}
		})
		const n = 1000
		run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: 4, Requests: n, Timeout: 5 * time.Second, Duration: 30 * time.Second}, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		fcWant(t, "completed", r.Requests, n)
		fcWant(t, "issued", r.Issued, n)
		fcWantMap(t, "errors", r.Errors, nil)
		fcWantMap(t, "status", r.Status, map[string]int64{"200": n})
		// Decoded body bytes would be 30,000; wire bytes are larger and exact.
		fcWant(t, "bytes read (wire)", r.BytesRead, n*wire)
		if r.BytesRead <= n*30 {
			t.Errorf("wire bytes %d not above the decoded body total %d", r.BytesRead, n*30)
		}
		// Split as h2load's traffic line: headers as written, the body
		// without its chunk framing.
		fcWant(t, "header bytes", r.HeaderBytes, n*int64(len(head)))
		fcWant(t, "body bytes", r.BodyBytes, n*30)
		fcWant(t, "header field bytes (HTTP/1.1: as on the wire)", r.HeaderFieldBytes, n*int64(len(head)))
		fcWantMap(t, "content encodings", r.ContentEncoding, map[string]int64{"identity": n})
		fcWant(t, "connections opened", r.ConnectionsOpened, 4)
		fcWant(t, "reconnects", r.Reconnects, 0)
		fcWant(t, "server: connections accepted", srv.Stats.Accepted.Load(), 4)
		fcWant(t, "server: requests read", srv.Stats.Requests.Load(), n)
		fcLatencyComplete(t, r)
		if r.Latency != nil && r.Latency.P50 < 40_000 {
			t.Errorf("latency p50 = %dus, want >= 40ms (two 20 ms pauses inside every body)", r.Latency.P50)
		}
		if r.Latency != nil && r.Latency.Min < 40_000 {
			t.Errorf("latency min = %dus, want >= 40ms: no response can end before its last chunk", r.Latency.Min)
		}
		// The headers and the first chunk leave at once: time to first byte
		// is far below the latency, which proves latency is not taken at
		// the headers.
		if r.TTFBUs == nil || r.TTFBUs.P50 >= 20_000 {
			t.Errorf("TTFB = %+v, want p50 < 20ms (headers are sent without delay)", r.TTFBUs)
		}
		fcWantRates(t, r)
	})

	t.Run("awkward_framing", func(t *testing.T) {
		// Same fault, harder framing: chunk extensions, upper- and
		// lower-case hex sizes with leading zeros, a chunk larger than the
		// client's 16 KiB read buffer, trailer fields after the last chunk,
		// and every piece written separately so that size lines, data and
		// CRLFs straddle TLS records.
		big := bytes.Repeat([]byte("B"), 20000)
		pieces := []string{
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Type: application/octet-stream\r\n\r\n",
			"7;name=value\r\n", "abcdefg", "\r\n",
			fmt.Sprintf("%X\r\n", len(big)), string(big), "\r\n",
			"00000001\r\nz\r\n",
			"1a ; ext=\"quoted\"\r\n", strings.Repeat("c", 0x1a), "\r", "\n",
			"0;final=yes\r\n", "X-Checksum: 42\r\n", "X-Other: end\r\n", "\r\n",
		}
		var wire int64
		for _, p := range pieces {
			wire += int64(len(p))
		}
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				for _, p := range pieces {
					if _, err := c.Write([]byte(p)); err != nil {
						return
					}
				}
			}
		})
		const n = 1000
		run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: 4, Requests: n, Timeout: 5 * time.Second, Duration: 30 * time.Second}, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		fcWant(t, "completed", r.Requests, n)
		fcWantMap(t, "errors", r.Errors, nil)
		fcWantMap(t, "status", r.Status, map[string]int64{"200": n})
		fcWant(t, "bytes read (wire)", r.BytesRead, n*wire)
		fcWant(t, "connections opened", r.ConnectionsOpened, 4)
		fcWant(t, "reconnects", r.Reconnects, 0)
		fcWant(t, "server: connections accepted", srv.Stats.Accepted.Load(), 4)
		fcWant(t, "server: requests read", srv.Stats.Requests.Load(), n)
		fcLatencyComplete(t, r)
		fcWantRates(t, r)
	})
}

package engine

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// rawKeepAliveServer answers every request on a connection with a fixed
// 600-byte response, reading request heads without allocating much, so
// the benchmark measures the client. withTLS false serves plain HTTP.
func rawKeepAliveServer(b testing.TB, withTLS bool) (url string, ca []byte) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	scheme := "http"
	if withTLS {
		ts := httptest.NewUnstartedServer(http.NotFoundHandler()) // only for its certificate
		ts.StartTLS()
		cert := ts.TLS.Certificates[0]
		ca = pemCert(ts.Certificate().Raw)
		ts.Close()
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
		scheme = "https"
	}
	b.Cleanup(func() { ln.Close() })
	go acceptRaw(ln)
	return scheme + "://" + ln.Addr().String() + "/", ca
}

// keepAliveConn returns a prepared one-connection engine against a raw
// keep-alive server, warmed up.
func keepAliveConn(b testing.TB, withTLS bool) (*conn, *entry) {
	url, ca := rawKeepAliveServer(b, withTLS)
	p := plan.Plan{URL: url, Connections: 1, Duration: time.Hour, TLS: plan.TLS{CAPEM: ca}}
	p.SetDefaults()
	e, err := New(context.Background(), Config{Share: plan.Shares("b", p, 1)[0], Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	if _, err := e.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	e.mono = time.Now()
	e.windowStart = e.mono
	e.interval = time.Hour
	c := e.slots[0].(*conn)
	en := &e.entries[0]
	for range 100 { // warm up buffers and TLS state
		o := c.do(time.Now(), en)
		c.w.rec.record(0, &o)
	}
	return c, en
}

// BenchmarkKeepAliveRequest measures one HTTP/1.1 keep-alive request
// through the engine's request path (write, read the whole response,
// record), as the closed loop runs it, over TLS and in clear text, with
// cpu-ns/op, the process's CPU per request (client and the in-process
// server: on a shared machine, steadier than the wall time). With
// -benchmem: the clear-text path allocates nothing per request; over TLS
// crypto/tls allocates its record reader (conn.go readFromUntil) on each
// read, which Phalanx cannot avoid without a fork of crypto/tls.
func BenchmarkKeepAliveRequest(b *testing.B) {
	for _, withTLS := range []bool{true, false} {
		name := "tls"
		if !withTLS {
			name = "clear"
		}
		b.Run(name, func(b *testing.B) {
			c, en := keepAliveConn(b, withTLS)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				o := c.do(time.Now(), en)
				if o.failed {
					b.Fatalf("request failed: %v", o.kind)
				}
				c.w.rec.record(0, &o)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestKeepAliveRequestAllocatesNothing: the engine's own request path
// (serialized request, response reader, recorder) allocates nothing per
// request in steady state.
func TestKeepAliveRequestAllocatesNothing(t *testing.T) {
	c, en := keepAliveConn(t, false)
	allocs := testing.AllocsPerRun(2000, func() {
		o := c.do(time.Now(), en)
		if o.failed {
			t.Fatalf("request failed: %v", o.kind)
		}
		c.w.rec.record(0, &o)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per keep-alive request, want 0", allocs)
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// BenchmarkClosedLoopRun measures whole closed-loop requests through Run
// (pacer, request, settle, record) in count mode: one connection, b.N
// requests, against the raw keep-alive server in clear text.
func BenchmarkClosedLoopRun(b *testing.B) {
	url, _ := rawKeepAliveServer(b, false)
	n := max(b.N, 1)
	p := plan.Plan{URL: url, Connections: 1, Requests: int64(n), Timeout: 10 * time.Second}
	benchRun(b, p)
}

// BenchmarkH2ClosedLoopRun measures whole closed-loop HTTP/2 requests
// through Run (pacer, HEADERS, response, settle, record) in count mode:
// one connection of 10 streams, b.N GETs with browser-like headers,
// against the framing-level server (h2FrameServer) over TLS on loopback
// answering with a static file's response headers.
// hdr-B/req is the HEADERS payload the server received per request;
// rd/req and wr/req the client's read and write calls per request (the
// server writes each response on its own, so rd/req is 1 here); chained/req
// the share of requests the read loop sent itself (h2chain.go).
func BenchmarkH2ClosedLoopRun(b *testing.B) {
	srv := newH2FrameServer(b, func(int64, string, string) h2Action { return h2Answer })
	// A static file's response headers, as lighttpd's and nginx's.
	srv.extra = []string{"content-type", "text/html", "accept-ranges", "bytes", "etag", `"3155521155"`,
		"last-modified", "Tue, 01 Dec 2026 23:59:58 GMT", "date", "Wed, 02 Dec 2026 01:45:00 GMT", "server", "lighttpd/1.4.69"}
	n := max(b.N, 1)
	p := plan.Plan{URL: srv.url + "/index.html", Protocol: plan.H2, MaxStreams: 10, Connections: 1, Requests: int64(n),
		Timeout: 10 * time.Second, TLS: plan.TLS{CAPEM: srv.ca},
		Headers: []plan.Header{{Name: "Accept", Value: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
			{Name: "Accept-Encoding", Value: "gzip, deflate, br"}, {Name: "Accept-Language", Value: "en-US,en;q=0.5"}}}
	h2Reads.Store(0)
	h2Writes.Store(0)
	e, _ := benchRun(b, p)
	b.StopTimer()
	b.ReportMetric(float64(e.slots[0].(*h2conn).chained.Load())/float64(n), "chained/req")
	b.ReportMetric(float64(srv.headerBytes.Load())/float64(n), "hdr-B/req")
	b.ReportMetric(float64(h2Reads.Load())/float64(n), "rd/req")
	b.ReportMetric(float64(h2Writes.Load())/float64(n), "wr/req")
}

// benchRun runs count-mode plan p (p.Requests requests) on one worker,
// timing only Run, and returns the (closed) engine and the process CPU
// time Run took.
func benchRun(b *testing.B, p plan.Plan) (*Engine, time.Duration) {
	b.Helper()
	p.SetDefaults()
	e, err := New(context.Background(), Config{Share: plan.Shares("b", p, 1)[0], Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	res, err := e.Run(context.Background(), time.Now(), func(Interval) {})
	cpu := processCPU() - cpu0
	if err != nil || res.Issued != p.Requests {
		b.Fatalf("Run = issued %d, %v; want %d", res.Issued, err, p.Requests)
	}
	return e, cpu
}

// BenchmarkOpenLoopLateness runs open-loop windows of 2 s at 200, 2,000
// and 20,000 requests/s against the in-process raw keep-alive server
// (clear text), once per pacing, and reports the send lateness (actual
// send − intended time) p50 and p99, the intended-time latency p50 minus
// the service time p50 (what the tool adds to a latency a user reads), and
// the process CPU per request (client and in-process server together:
// compare pacings with it, not tools). Run with -benchtime=1x; -count=N
// repeats every pacing in turn (interleaved rounds). The figures are the
// machine's: rerun on a quiet one to see the mechanism's precision.
func BenchmarkOpenLoopLateness(b *testing.B) {
	url, _ := rawKeepAliveServer(b, false)
	for _, rate := range []int{200, 2000, 20000} {
		for _, pacing := range []Pacing{PacingGoTimer, PacingTimerfd, PacingTimerfdSpin, PacingThread, PacingSlotTimerfd, PacingSlotTimerfdSpin} {
			b.Run(fmt.Sprintf("R=%d/%s", rate, pacing), func(b *testing.B) {
				for range b.N {
					openLoopLateness(b, url, rate, pacing)
				}
			})
		}
	}
}

func openLoopLateness(b *testing.B, url string, rate int, pacing Pacing) {
	var cpu time.Duration
	all, counts := openLoopRun(b, url, rate, pacing, 0, 2*time.Second, func() { cpu = processCPU() - cpu })
	b.ReportMetric(float64(all.Lateness.ValueAtPercentile(50)), "late-p50-us")
	b.ReportMetric(float64(all.Lateness.ValueAtPercentile(99)), "late-p99-us")
	b.ReportMetric(float64(all.Latency.ValueAtPercentile(50)-all.Service.ValueAtPercentile(50)), "lat-svc-p50-us")
	b.ReportMetric(float64(all.Service.ValueAtPercentile(50)), "svc-p50-us")
	b.ReportMetric(float64(cpu.Microseconds())/float64(counts.Requests), "proc-cpu-us/req")
	b.ReportMetric(float64(counts.Missed), "missed")
}

// openLoopRun runs one open-loop window of length d at rate requests/s
// (16 connections, up to 64) against url with pacing and the plan's
// pacing window (0: none), calling mark just before and just after Run,
// and returns the merged histograms and counters.
func openLoopRun(b *testing.B, url string, rate int, pacing Pacing, window, d time.Duration, mark func()) (*hist.Set, measure.Counts) {
	p := plan.Plan{URL: url, Connections: 16, MaxConnections: 64, Load: plan.OpenLoop, Rate: int64(rate), PacingWindow: window, Duration: d, Timeout: 5 * time.Second}
	p.SetDefaults()
	e, err := New(context.Background(), Config{Share: plan.Shares("b", p, 1)[0], Pacing: pacing})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	all := hist.NewSet()
	var counts measure.Counts
	mark()
	if _, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) {
		if err := all.Merge(iv.Hists); err != nil {
			b.Error(err)
		}
		counts.Add(&iv.Counts)
	}); err != nil {
		b.Fatal(err)
	}
	mark()
	if counts.Requests == 0 {
		b.Fatal("no request completed")
	}
	return all, counts
}

// processCPU returns the process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

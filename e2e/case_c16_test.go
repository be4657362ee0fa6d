package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestCaseC16HistogramRange covers field case C16. Tools with a fixed
// histogram ceiling refused or clamped latencies above it (tcpkali dropped
// anything over 100 s, a Kafka benchmark reported 5000 ms for anything
// longer), and tools with nothing completed printed INT64-max latencies or
// an underflowed elapsed time.
//
// (a), scaled from 150 s to 15 s and run closed loop: the server holds its
// first 5 requests 15 s and answers the rest in 1 ms. The merged histogram
// must hold every completed request, max = 15 s ± 1 s, and exactly 5
// samples ≥ 14.9 s.
//
// (b): the server accepts TCP and closes at once, before any TLS. The run
// must still last its 5 s and report 0 completions, the errors by kind,
// "no samples" for latency (never 0, NaN or INT64-max) and 0 requests/s.
func TestCaseC16HistogramRange(t *testing.T) {
	t.Run("a_long_latencies", func(t *testing.T) {
		const (
			held     = 5
			hold     = 15 * time.Second
			duration = 16 * time.Second
		)
		resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
		var seen atomic.Int64
		quit := make(chan struct{})
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				d := time.Millisecond
				if seen.Add(1) <= held {
					d = hold
				}
				timer := time.NewTimer(d)
				select {
				case <-timer.C:
				case <-quit:
					timer.Stop()
					return
				}
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		})
		t.Cleanup(func() { close(quit) })

		res, rep, err := c16Run(t, plan.Plan{
			URL: srv.URL("/"), Connections: 32, Duration: duration, Timeout: 60 * time.Second,
		}, 1, 2)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		h, err := hist.Decode(res.GetHistograms().GetLatency())
		if err != nil {
			t.Fatalf("merged latency histogram: %v", err)
		}
		n := h.Count()
		t.Logf("completed %d, errors %v, in flight %d, histogram count %d, max %d µs, over range %d; agent failures: %q", rep.Requests, rep.Errors, rep.InFlight, n, h.Max(), h.OverRange(), agentFailures(rep))

		if n != rep.Requests || rep.Latency == nil || rep.Latency.Count != n {
			t.Errorf("histogram count %d, report latency %+v, completed %d: want all equal", n, rep.Latency, rep.Requests)
		}
		if rep.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none (timeout is 60 s)", rep.Errors)
		}
		if h.OverRange() != 0 {
			t.Errorf("%d samples over the histogram's range: 15 s is well inside it", h.OverRange())
		}
		holdUs := hold.Microseconds()
		if maxUs := h.Max(); maxUs < holdUs-1e6 || maxUs > holdUs+1e6 {
			t.Errorf("max = %d µs, want 15 s ± 1 s", maxUs)
		}
		if rep.Latency != nil && rep.Latency.Max != h.Max() {
			t.Errorf("report max %d µs, histogram max %d µs", rep.Latency.Max, h.Max())
		}
		// Exactly 5 samples ≥ 14.9 s: with the samples sorted, the
		// (n-5)th is below 14.9 s and the (n-4)th at or above it.
		if n <= held {
			t.Fatalf("only %d samples", n)
		}
		limit := hold.Microseconds() - 100_000
		below := h.ValueAtPercentile(100 * float64(n-held) / float64(n))
		// Whole ranks: HdrHistogram rounds rank p/100·n + 0.5 down, so a
		// half rank could land on either side through float error.
		atOrAbove := h.ValueAtPercentile(100 * (float64(n) - held + 1) / float64(n))
		if below >= limit || atOrAbove < limit {
			t.Errorf("sample %d of %d = %d µs, sample %d = %d µs: want exactly %d samples ≥ %d µs", n-held, n, below, n-held+1, atOrAbove, held, limit)
		}
		if got := srv.Stats.Requests.Load(); got != rep.Issued {
			t.Errorf("server received %d, issued %d", got, rep.Issued)
		}
	})

	t.Run("b_no_handshake", func(t *testing.T) {
		const duration = 5 * time.Second
		srv := startRaw(t, nil, func(net.Conn, *bufio.Reader, int64, *rawStats) {}) // plain TCP: close at once
		start := time.Now()
		_, rep, err := c16Run(t, plan.Plan{
			URL: "https://127.0.0.1:" + srv.Port() + "/", Connections: 4, Duration: duration,
		}, 1, 2)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("run ended with an error after %v instead of a report of the %v window's failures: %v", elapsed.Round(time.Millisecond), duration, err)
		}
		t.Logf("completed %d, errors %v, in flight %d, issued %d, window %.3f s, %.2f req/s, latency %+v, server accepted %d, elapsed %v; agent failures: %q",
			rep.Requests, rep.Errors, rep.InFlight, rep.Issued, rep.DurationS, rep.RPS, rep.Latency, srv.Stats.Accepted.Load(), elapsed, agentFailures(rep))
		if rep.Requests != 0 || len(rep.Status) != 0 {
			t.Errorf("completed %d, status %v: want none", rep.Requests, rep.Status)
		}
		if rep.ErrorTotal() == 0 {
			t.Errorf("no errors reported")
		}
		for kind := range rep.Errors {
			switch kind {
			case "tls", "closed", "reset", "connect":
			default:
				t.Errorf("errors[%s] = %d: a connection closed before the TLS handshake is a tls, closed, reset or connect error", kind, rep.Errors[kind])
			}
		}
		if rep.Latency != nil {
			t.Errorf("latency = %+v, want no samples (nil)", rep.Latency)
		}
		if rep.RPS != 0 || math.IsNaN(rep.RPS) {
			t.Errorf("requests/s = %v, want 0", rep.RPS)
		}
		if math.Abs(rep.DurationS-duration.Seconds()) > 0.1 {
			t.Errorf("window = %v s, want 5 s", rep.DurationS)
		}
		if elapsed < duration || elapsed > duration+10*time.Second {
			t.Errorf("run took %v, want about %v", elapsed, duration)
		}
	})
}

// c16Run runs p on a fresh in-process cluster, like runCase, and also
// returns the raw result (with the merged histograms). A run error is
// returned, not fatal.
func c16Run(t *testing.T, p plan.Plan, agents, workers int) (*pb.RunResult, *report.Report, error) {
	t.Helper()
	if len(p.TLS.CAPEM) == 0 && !p.TLS.Insecure {
		p.TLS.CAPEM = testCA(t).CAPEM
	}
	c, err := localcluster.Start(context.Background(), agents, workers, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	if err != nil {
		return nil, nil, err
	}
	rep, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Requests + rep.ErrorTotal() + rep.InFlight; got != rep.Issued {
		t.Errorf("accounting: completed %d + errors %d + in flight %d = %d, issued %d", rep.Requests, rep.ErrorTotal(), rep.InFlight, got, rep.Issued)
	}
	return res, rep, nil
}

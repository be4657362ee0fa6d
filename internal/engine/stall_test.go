package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// stallListener delays each accepted connection's first read (the TLS
// ClientHello) by stall, in the connection's own goroutine: every
// handshake takes at least stall, however many run at once.
type stallListener struct {
	net.Listener
	stall time.Duration
}

func (l stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, stall: l.stall}, nil
}

type stallConn struct {
	net.Conn
	stall time.Duration
	once  sync.Once
}

func (c *stallConn) Read(b []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.stall) })
	return c.Conn.Read(b)
}

// TestConnectionRateStalledHandshakes: a server whose every TLS handshake
// takes at least 100 ms, under --cps 100 with --max-open 4 (at most 40
// connections/s fit): the starts fall behind, and
//   - every handshake latency runs from the connection's intended start:
//     the largest is at least the largest send lateness plus the stall,
//     and the median exceeds the handshake's own (TLS full) median, with
//     --requests-per-connection 0 (handshake only) and 1 (whose request
//     latency holds the same);
//   - the late starts are counted as missed, and the tickets found late at
//     the cap as growth refused (each at most once: never more than the
//     tickets, nor than the missed ones and the connections still open at
//     the end).
func TestConnectionRateStalledHandshakes(t *testing.T) {
	const stall = 100 * time.Millisecond
	for _, k := range []int{0, 1} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
		srv.Listener = stallListener{Listener: srv.Listener, stall: stall}
		srv.StartTLS()
		p := plan.Plan{URL: srv.URL, Connections: 2, MaxConnections: 4, Duration: time.Second, Interval: 500 * time.Millisecond, Timeout: 5 * time.Second,
			Load: plan.OpenLoop, Rate: 100, ConnectionRate: true, RequestsPerConnection: k, TLS: plan.TLS{Insecure: true}}
		e := newEngine(t, p, 2)
		var total measure.Counts
		hs := hist.NewSet()
		res, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) {
			total.Add(&iv.Counts)
			if err := hs.Merge(iv.Hists); err != nil {
				t.Error(err)
			}
		})
		e.Close()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		hl, tlsFull, late, lat := hs.HandshakeLatency, hs.TLSFull, hs.Lateness, hs.Latency
		t.Logf("k=%d: %d connections, %d unsent, %d missed, %d growth refused, %d requests, in flight %d; handshake latency p50 %v max %v, TLS full p50 %v max %v, lateness max %v, latency max %v",
			k, total.ConnectionsOpened, total.Unsent, total.Missed, total.GrowthRefused, total.Requests, res.InFlight,
			us(hl.ValueAtPercentile(50)), us(hl.Max()), us(tlsFull.ValueAtPercentile(50)), us(tlsFull.Max()), us(late.Max()), us(lat.Max()))
		if total.ErrorTotal() != 0 {
			t.Fatalf("k=%d: errors %v", k, total.ErrorMap())
		}
		if got := total.ConnectionsOpened + total.Unsent; got != 100 {
			t.Errorf("k=%d: connections %d + unsent %d = %d, want the 100 tickets", k, total.ConnectionsOpened, total.Unsent, got)
		}
		if hl.Count() != total.ConnectionsOpened || tlsFull.Count() != total.ConnectionsOpened {
			t.Errorf("k=%d: handshake latency holds %d, TLS full %d, for %d connections", k, hl.Count(), tlsFull.Count(), total.ConnectionsOpened)
		}
		// 4 connections of at least 100 ms take at most 40 of the 100
		// tickets in the second: the rest start late or never.
		if total.Missed < 50 || late.Max() < (200*time.Millisecond).Microseconds() {
			t.Errorf("k=%d: %d missed, lateness max %v: want at least 50 missed and 200 ms late", k, total.Missed, us(late.Max()))
		}
		if total.GrowthRefused < 40 || total.GrowthRefused > 100 || total.GrowthRefused > total.Missed+4 {
			t.Errorf("k=%d: %d growth refused (%d missed): want at least 40, at most the 100 tickets and the missed + the 4 open", k, total.GrowthRefused, total.Missed)
		}
		// Every handshake latency is at least its own lateness plus the
		// stall (the histograms' 3 significant digits: 0.1 %).
		if floor := (late.Max() + stall.Microseconds()) * 999 / 1000; hl.Max() < floor {
			t.Errorf("k=%d: handshake latency max %v below the lateness max %v plus the %v stall", k, us(hl.Max()), us(late.Max()), stall)
		}
		if hl.ValueAtPercentile(50) <= tlsFull.ValueAtPercentile(50) {
			t.Errorf("k=%d: handshake latency p50 %v not above the TLS handshake's own p50 %v: late starts are missing from it", k, us(hl.ValueAtPercentile(50)), us(tlsFull.ValueAtPercentile(50)))
		}
		if k == 1 {
			if floor := (late.Max() + stall.Microseconds()) * 999 / 1000; lat.Count() == 0 || lat.Max() < floor {
				t.Errorf("request latency max %v (%d samples) below the lateness max %v plus the %v stall", us(lat.Max()), lat.Count(), us(late.Max()), stall)
			}
		}
	}
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// connTarget starts a TLS server that counts the connections it accepted
// and the requests it served.
func connTarget(t *testing.T) (srv *httptest.Server, conns, reqs *atomic.Int64) {
	t.Helper()
	conns, reqs = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, conns, reqs
}

// runConnRate runs a connection-rate plan of k requests per connection at
// 100 connections/s for 1 s and returns the window's counts.
func runConnRate(t *testing.T, srv *httptest.Server, k int) (measure.Counts, Result) {
	t.Helper()
	p := plan.Plan{URL: srv.URL, Connections: 2, MaxConnections: 20, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 100, ConnectionRate: true, RequestsPerConnection: k, TLS: plan.TLS{Insecure: true}}
	e := newEngine(t, p, 2)
	prep, err := e.Prepare(context.Background())
	if err != nil || prep.Connections != 0 {
		t.Fatalf("Prepare = %+v, %v: want no connection opened ahead", prep, err)
	}
	var total measure.Counts
	var hcount int64
	res, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) {
		total.Add(&iv.Counts)
		hcount += iv.Hists.Latency.Count()
		t.Logf("interval %d: %d conns, %d requests, %d missed; tls p50 %dus, latency p50 %dus", iv.Index, iv.Counts.ConnectionsOpened, iv.Counts.Requests, iv.Counts.Missed, iv.Hists.TLSFull.ValueAtPercentile(50), iv.Hists.Latency.ValueAtPercentile(50))
	})
	if err != nil {
		t.Fatal(err)
	}
	if hcount != total.Requests {
		t.Errorf("latency histogram holds %d, requests %d", hcount, total.Requests)
	}
	if total.ErrorTotal() != 0 {
		t.Errorf("errors: %v", total.ErrorMap())
	}
	return total, res
}

// checkTickets checks that every ticket of the window (100/s for 1 s) is
// a connection opened or counted unsent (every connection up to the cap
// was busy), and that the server accepted exactly the connections opened.
func checkTickets(t *testing.T, total measure.Counts, accepted int64) {
	t.Helper()
	if got := total.ConnectionsOpened + total.Unsent; got != 100 {
		t.Errorf("connections opened %d + unsent %d = %d, want the 100 tickets", total.ConnectionsOpened, total.Unsent, got)
	}
	if total.ConnectionsOpened < 10 {
		t.Errorf("connections opened %d of 100", total.ConnectionsOpened)
	}
	if accepted != total.ConnectionsOpened {
		t.Errorf("server accepted %d connections, engine opened %d", accepted, total.ConnectionsOpened)
	}
	if total.HandshakesFull != total.ConnectionsOpened {
		t.Errorf("full handshakes %d of %d connections", total.HandshakesFull, total.ConnectionsOpened)
	}
}

func TestConnectionRate(t *testing.T) {
	srv, conns, reqs := connTarget(t)
	total, res := runConnRate(t, srv, 3)
	srv.Close() // waits for the handlers
	checkTickets(t, total, conns.Load())
	if total.Requests+res.InFlight != res.Issued || res.Issued != reqs.Load() {
		t.Errorf("requests %d + in flight %d, issued %d, server served %d", total.Requests, res.InFlight, res.Issued, reqs.Load())
	}
	// 3 requests per connection; those open at the window's end send no
	// more after the one in flight (at most the cap, 20).
	if n, c := res.Issued, total.ConnectionsOpened; n > 3*c || n < 3*(c-20) {
		t.Errorf("issued %d requests on %d connections, want 3 each", n, c)
	}
}

func TestConnectionRateHandshakeOnly(t *testing.T) {
	srv, conns, reqs := connTarget(t)
	total, res := runConnRate(t, srv, 0)
	srv.Close()
	checkTickets(t, total, conns.Load())
	if total.Requests != 0 || reqs.Load() != 0 || res.Issued != 0 {
		t.Errorf("requests %d, served %d, issued %d: want none", total.Requests, reqs.Load(), res.Issued)
	}
}

// TestConnectionRateEndsAtWindowEndWithBacklog: a connection rate whose
// tickets are still backlogged at the window's end (a 300-ms server at
// 1,000 connections/s, slots growing from 1 under a cap of 4,000) ends
// once the requests in flight have: the watcher that grows the slots
// stops with the window. It used to add a slot per untaken ticket every
// MissThreshold until the cap, holding the last interval for 20 s (an
// agent given up as silent by its coordinator).
func TestConnectionRateEndsAtWindowEndWithBacklog(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		_, _ = w.Write([]byte("ok"))
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := plan.Plan{URL: srv.URL, Connections: 1, MaxConnections: 4000, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 1000, ConnectionRate: true, RequestsPerConnection: 1, Timeout: 5 * time.Second, TLS: plan.TLS{Insecure: true}}
	e := newEngine(t, p, 1)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	start := time.Now().Add(50 * time.Millisecond)
	res, err := e.Run(context.Background(), start, func(iv Interval) { total.Add(&iv.Counts) })
	if err != nil {
		t.Fatal(err)
	}
	after := time.Since(start.Add(p.Duration))
	t.Logf("run ended %v after the window: %d connections opened, %d unsent, %d missed, %d growth refused, issued %d",
		after.Round(time.Millisecond), total.ConnectionsOpened, total.Unsent, total.Missed, total.GrowthRefused, res.Issued)
	if total.Unsent == 0 && total.Missed == 0 {
		t.Fatalf("no ticket was late: the test's premise (a backlog at the window's end) does not hold")
	}
	// The requests in flight end within 300 ms (+ a loaded machine's
	// slack); the old watcher took cap × 5 ms = 20 s.
	if after > 4*time.Second {
		t.Errorf("Run returned %v after the window's end, want within the in-flight requests' 300 ms (+ slack)", after)
	}
}

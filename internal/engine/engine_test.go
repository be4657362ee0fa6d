package engine

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// tlsTarget starts an httptest TLS server that counts requests.
func tlsTarget(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64, []byte) {
	t.Helper()
	return startTarget(t, h, false)
}

// tlsTargetH2 is tlsTarget speaking HTTP/2 (ALPN h2).
func tlsTargetH2(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64, []byte) {
	t.Helper()
	return startTarget(t, h, true)
}

// startTarget starts a TLS test server running h, counting its requests,
// with HTTP/2 enabled when h2 is set; it returns the server, the count
// and its certificate in PEM (the client's CA).
func startTarget(t *testing.T, h http.HandlerFunc, h2 bool) (*httptest.Server, *atomic.Int64, []byte) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, &n, ca
}

func newEngine(t *testing.T, p plan.Plan, conns int) *Engine {
	t.Helper()
	p.SetDefaults()
	share := plan.Shares("t", p, 1)[0]
	share.Connections = conns
	e, err := New(context.Background(), Config{Share: share, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func TestClosedLoopAccounting(t *testing.T) {
	srv, served, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello world"))
	})
	e := newEngine(t, plan.Plan{URL: srv.URL + "/x", Connections: 4, Duration: 1500 * time.Millisecond, Interval: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: ca}}, 4)
	ctx := context.Background()
	prep, err := e.Prepare(ctx)
	if err != nil || prep.Connections != 4 {
		t.Fatalf("Prepare = %+v, %v", prep, err)
	}
	if served.Load() != 0 {
		t.Fatalf("requests before start: %d", served.Load())
	}
	start := time.Now().Add(50 * time.Millisecond)
	var ivs []Interval
	var hcount, late int64
	res, err := e.Run(ctx, start, func(iv Interval) {
		hcount += iv.Hists.Latency.Count() // histograms are valid only during emit
		late += iv.Hists.Lateness.Count()
		ivs = append(ivs, iv)
	})
	if err != nil {
		t.Fatal(err)
	}
	if late != 0 {
		t.Errorf("closed loop recorded %d send-lateness samples, want none (sends follow no schedule)", late)
	}
	if len(ivs) != 3 {
		t.Fatalf("got %d intervals, want 3", len(ivs))
	}
	var total measure.Counts
	for k, iv := range ivs {
		if iv.Index != k || !iv.Start.Equal(start.Add(time.Duration(k)*500*time.Millisecond)) || iv.End.Sub(iv.Start) != 500*time.Millisecond {
			t.Errorf("interval %d: index %d, [%v, %v)", k, iv.Index, iv.Start.Sub(start), iv.End.Sub(start))
		}
		if iv.Counts.Requests == 0 {
			t.Errorf("interval %d has no requests", k)
		}
		total.Add(&iv.Counts)
	}
	if hcount != total.Requests {
		t.Errorf("histogram count %d != requests %d", hcount, total.Requests)
	}
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued {
		t.Errorf("completed %d + errors %d + in flight %d = %d, want issued %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued)
	}
	if total.ErrorTotal() != 0 {
		t.Errorf("errors: %v", total.ErrorMap())
	}
	if got := served.Load(); got != res.Issued {
		t.Errorf("server saw %d requests, engine issued %d", got, res.Issued)
	}
	if total.Status[200] != total.Requests {
		t.Errorf("status 200 = %d of %d", total.Status[200], total.Requests)
	}
	if d := res.FirstSend.Sub(start); d < 0 || d > 20*time.Millisecond {
		t.Errorf("first send %v after start", d)
	}
	for k, iv := range ivs { // each interval carries the first send so far: an agent lost before its Done still has its start
		if !iv.FirstSend.Equal(res.FirstSend) {
			t.Errorf("interval %d: first send %v after start, want the result's %v", k, iv.FirstSend.Sub(start), res.FirstSend.Sub(start))
		}
	}
}

func TestStopClosesConnections(t *testing.T) {
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond)
	})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Duration: time.Minute, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := e.Run(ctx, time.Now(), func(Interval) {})
	if err == nil {
		t.Fatal("Run returned nil after cancel")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("Run took %v to stop after cancel", d)
	}
}

// TestCancelBeforeClosedLoopStart: a closed-loop run cancelled while its
// first slot waits for a start instant 10 s away returns at once with the
// context's error, having sent nothing (the wait ends with the engine's
// stop, not at the instant).
func TestCancelBeforeClosedLoopStart(t *testing.T) {
	srv, served, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Duration: time.Second, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := e.Run(ctx, time.Now().Add(10*time.Second), func(Interval) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("Run took %v to stop after cancel", d)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("server saw %d requests before the start", n)
	}
}

func TestPrepareUnreachable(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1:1/", Connections: 2}
	e := newEngine(t, p, 2)
	_, err := e.Prepare(context.Background())
	if err == nil {
		t.Fatal("Prepare succeeded against a closed port")
	}
	t.Log(err)
}

func TestCertificateVerifiedByDefault(t *testing.T) {
	srv, _, _ := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 1}, 1)
	prep, err := e.Prepare(context.Background())
	if err == nil || prep.Errors["tls"] != 1 {
		t.Fatalf("Prepare against an untrusted cert = %+v, %v; want a tls error", prep, err)
	}
}

// TestPrepareTLSMismatch: when the server refuses every handshake with a
// TLS alert (here: no common version), the run does not start; it fails in
// preparation with the alert, instead of measuring a stream of failed
// handshakes.
func TestPrepareTLSMismatch(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := plan.Plan{URL: srv.URL, Connections: 2, TLS: plan.TLS{Insecure: true, MaxVersion: "1.2"}}
	e := newEngine(t, p, 2)
	prep, err := e.Prepare(context.Background())
	if err == nil || !strings.Contains(err.Error(), "protocol version") || prep.Errors["tls"] != 2 {
		t.Fatalf("Prepare with no common TLS version = %+v, %v; want an error naming the protocol version alert", prep, err)
	}
	t.Log(err)

	// The same server at an agreeable version prepares.
	p.TLS.MaxVersion = ""
	e = newEngine(t, p, 2)
	if prep, err := e.Prepare(context.Background()); err != nil || prep.Connections != 2 {
		t.Fatalf("Prepare at TLS 1.3 = %+v, %v", prep, err)
	}
}

func TestHTTP2Streams(t *testing.T) {
	var n atomic.Int64
	var maxActive, active atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		a := active.Add(1)
		for {
			m := maxActive.Load()
			if a <= m || maxActive.CompareAndSwap(m, a) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		active.Add(-1)
		if r.ProtoMajor != 2 {
			w.WriteHeader(500)
			return
		}
		_, _ = w.Write([]byte("h2 body"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Protocol: plan.H2, MaxStreams: 5, Requests: 500, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	res, err := e.Run(context.Background(), time.Now(), func(iv Interval) { total.Add(&iv.Counts) })
	if err != nil {
		t.Fatal(err)
	}
	if total.Requests != 500 || total.Status[200] != 500 || n.Load() != 500 || res.Issued != 500 {
		t.Fatalf("requests %d, 200s %d, server %d, issued %d; errors %v", total.Requests, total.Status[200], n.Load(), res.Issued, total.ErrorMap())
	}
	if total.ConnectionsOpened != 2 || total.TLS["alpn:h2"] != 2 {
		t.Errorf("connections %d, tls %v", total.ConnectionsOpened, total.TLS)
	}
	if res.MaxStreams != 5 || maxActive.Load() < 6 || maxActive.Load() > 10 {
		t.Errorf("effective streams %d, server saw at most %d concurrent, want 5 per connection", res.MaxStreams, maxActive.Load())
	}
}

// TestOpenLoopRate: a constant rate sends exactly rate × window requests
// (the schedule is exact), each interval holding its share.
func TestOpenLoopRate(t *testing.T) {
	srv, served, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 4, Load: plan.OpenLoop, Rate: 400, Duration: 2 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 4)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var per []int64
	var total measure.Counts
	var service, late int64
	res, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) {
		per = append(per, iv.Counts.Requests+iv.Counts.ErrorTotal())
		total.Add(&iv.Counts)
		service += iv.Hists.Service.Count()
		late += iv.Hists.Lateness.Count()
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != 800 || res.Issued != 800 || served.Load() != 800 {
		t.Fatalf("sent %d (issued %d, served %d), want exactly 800 = 400/s × 2 s", got, res.Issued, served.Load())
	}
	for k, n := range per {
		if n < 390 || n > 410 {
			t.Errorf("interval %d: %d requests, want 400 ± 10", k, n)
		}
	}
	if service != total.Requests {
		t.Errorf("service-time samples %d, want one per completed request (%d)", service, total.Requests)
	}
	if want := total.Requests + total.ErrorTotal(); late != want {
		t.Errorf("send-lateness samples %d, want one per send that ended in the window (%d)", late, want)
	}
}

// TestH2OpenLoopStagesExact: HTTP/2 open loop over a ramp and a steady
// stage (0 to 400/s in 1 s, then 400/s for 1 s: 600 sends), its streams
// chained by the sessions' read loops and pacers (h2pacer.go) and each
// worker's first send of the second stage handed to its slot's goroutine
// (an instant's wait): exactly the schedule's sends, each served once, one
// send-lateness sample per send, most sent by the chains, and every slot
// and session pacer had its timerfd (none fell back on a Go timer).
func TestH2OpenLoopStagesExact(t *testing.T) {
	srv, served, ca := tlsTargetH2(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Protocol: plan.H2, MaxStreams: 4, Connections: 4, Load: plan.OpenLoop,
		Stages: []plan.Stage{{Duration: time.Second, Rate: 400}, {Duration: time.Second, Rate: 400}}, TLS: plan.TLS{CAPEM: ca}}, 4)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	var late int64
	fds := e.alarmFds.Load()
	res, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) {
		total.Add(&iv.Counts)
		late += iv.Hists.Lateness.Count()
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every alarm closed, the budget is whole again unless one was
	// refused a timerfd (and waited on a Go timer, a millisecond late).
	if got := e.alarmFds.Load(); got != fds {
		t.Errorf("timerfd budget %d after the run, %d before: %d alarms (slots' or session pacers') went without one", got, fds, fds-got)
	}
	var chained int64
	for _, sl := range e.slots {
		chained += sl.(*h2conn).chained.Load()
	}
	t.Logf("issued %d, requests %d, errors %v, in flight %d, served %d, chained %d, missed %d", res.Issued, total.Requests,
		total.ErrorMap(), res.InFlight, served.Load(), chained, total.Missed)
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != 600 || res.Issued != 600 || served.Load() != 600 || total.ErrorTotal() != 0 {
		t.Fatalf("sent %d (issued %d, served %d, errors %v), want exactly 600 = 200 in the ramp + 400/s × 1 s, no error",
			got, res.Issued, served.Load(), total.ErrorMap())
	}
	if want := total.Requests + total.ErrorTotal(); late != want {
		t.Errorf("send-lateness samples %d, want one per send that ended in the window (%d)", late, want)
	}
	if chained < 300 {
		t.Errorf("%d of 600 requests sent by the sessions' read loops and pacers, want at least half", chained)
	}
}

// TestOpenLoopUnsentAreMissed: when every connection is busy until the
// window ends, the requests the schedule had due but nobody sent are
// counted as missed, never silently dropped.
func TestOpenLoopUnsentAreMissed(t *testing.T) {
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(400 * time.Millisecond) })
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Load: plan.OpenLoop, Rate: 200, Duration: time.Second, Timeout: 5 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	late := hist.New()
	res, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) {
		total.Add(&iv.Counts)
		if err := late.Merge(iv.Hists.Lateness); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Sends after the first two (one per connection, on time) waited for
	// a connection held 400 ms.
	if late.Count() > 2 && late.Max() < 300_000 {
		t.Errorf("send lateness max %d us over %d sends: sends that waited for a busy connection must show their wait", late.Max(), late.Count())
	}
	if res.Issued > 10 {
		t.Fatalf("issued %d: 2 connections held 400 ms each cannot send more than about 6 in 1 s", res.Issued)
	}
	// Each send after the first two left when its connection freed: it
	// queued, and its lateness is no delay of the client's (each left at
	// once after the response before it; one preemption of the test's
	// goroutine for over 1 ms on a loaded machine is allowed for).
	if total.Queued < late.Count()-2 || total.ClientLate > 1 {
		t.Errorf("queued %d, client-late %d of %d sends: want every send but the first two queued, none client-late", total.Queued, total.ClientLate, late.Count())
	}
	if total.Missed < 200-res.Issued {
		t.Fatalf("missed %d, issued %d: the %d scheduled requests must be issued or missed", total.Missed, res.Issued, 200)
	}
	// Those never sent are counted apart too: issued + unsent is what
	// was scheduled (200, or 199 when the last falls on the window's end).
	if got := res.Issued + total.Unsent; got < 199 || got > 200 || total.Unsent > total.Missed {
		t.Fatalf("issued %d + unsent %d = %d, missed %d: want the 200 scheduled, unsent within missed", res.Issued, total.Unsent, got, total.Missed)
	}
}

// TestOpenLoopWarmupBacklogCarried: when the warm-up ends with its sends
// still waiting for connections the server holds, the window's requests are
// warm-up tickets (carried: counted by their end, but not as the window's
// scheduled sends), and its unsent are the window's own tickets alone: the
// sends scheduled in the window, issued + unsent − carried, are its 200.
func TestOpenLoopWarmupBacklogCarried(t *testing.T) {
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(400 * time.Millisecond) })
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Load: plan.OpenLoop, Rate: 200, Warmup: 500 * time.Millisecond,
		Duration: time.Second, Timeout: 5 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	var late int64
	res, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) {
		total.Add(&iv.Counts)
		late += iv.Hists.Lateness.Count()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("issued %d, carried %d, unsent %d, missed %d, requests %d, in flight %d", res.Issued, total.Carried, total.Unsent, total.Missed, total.Requests, res.InFlight)
	if total.Carried == 0 || total.Carried > res.Issued {
		t.Errorf("carried %d of %d issued: the window's requests are warm-up tickets, want some and at most all", total.Carried, res.Issued)
	}
	if got := res.Issued + total.Unsent - total.Carried; got < 199 || got > 200 {
		t.Errorf("issued %d + unsent %d − carried %d = %d: want the window's 200 scheduled sends", res.Issued, total.Unsent, total.Carried, got)
	}
	if total.Missed < total.Unsent || late > res.Issued-total.Carried {
		t.Errorf("missed %d, unsent %d, lateness samples %d: want the unsent among the missed and no carried send's lateness", total.Missed, total.Unsent, late)
	}
}

// TestOpenLoopGrowsDuringStall: while every connection is stuck on a
// stalled server, requests still come due; the engine opens connections
// (up to the cap) to send them on schedule instead of waiting.
func TestOpenLoopGrowsDuringStall(t *testing.T) {
	var n atomic.Int64
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			time.Sleep(time.Second) // the first two requests stall their connections
		}
	})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, MaxConnections: 20, Load: plan.OpenLoop, Rate: 100, Duration: 1500 * time.Millisecond, Timeout: 5 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 2)
	res, total := runCounted(t, e)
	if res.Issued < 140 {
		t.Errorf("issued %d of 150 scheduled: the stall must not hold back the schedule", res.Issued)
	}
	if total.ConnectionsOpened <= 2 || total.ConnectionsOpened > 20 {
		t.Errorf("connections opened %d, want more than 2 and at most the cap of 20", total.ConnectionsOpened)
	}
}

// TestRecorderKeepsIntervalsWhenCollectorLags: samples recorded far ahead
// of the collector (a starved agent) still land in their own interval.
func TestRecorderKeepsIntervalsWhenCollectorLags(t *testing.T) {
	r := newRecorder(1)
	for k := range 40 {
		r.mu.Lock()
		r.counts(k).Requests += int64(k + 1)
		r.mu.Unlock()
	}
	spare := newSlot()
	for k := range 40 {
		s := r.swap(spare)
		if got := s.counts.Requests; got != int64(k+1) {
			t.Fatalf("interval %d holds %d requests, want %d", k, got, k+1)
		}
		s.reset()
		spare = s
	}
}

// TestClosedLoopStagesActivateOnTime: a closed-loop plan held at 2
// connections, then ramped to 6: each worker's slot j sends its first
// request when the worker's target reaches j+1, not before (a held stage
// runs exactly its target), and soon after (the slot waits for the
// computed instant, not a polling tick); the ramp's stage change is its
// start plus its first activation's lateness.
func TestClosedLoopStagesActivateOnTime(t *testing.T) {
	var mu sync.Mutex
	first := map[string]time.Time{} // connection → its first request
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if _, ok := first[r.RemoteAddr]; !ok {
			first[r.RemoteAddr] = time.Now()
		}
		mu.Unlock()
	})
	p := plan.Plan{URL: srv.URL, Connections: 2, TLS: plan.TLS{CAPEM: ca}, Interval: 200 * time.Millisecond,
		Stages: []plan.Stage{{Duration: 600 * time.Millisecond, Connections: 2}, {Duration: 800 * time.Millisecond, Connections: 6}, {Duration: 400 * time.Millisecond, Connections: 6}}}
	e := newEngine(t, p, 2) // 2 workers, each held at 1 then ramped to 3 (3 slots)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(50 * time.Millisecond)
	res, err := e.Run(context.Background(), start, func(Interval) {})
	if err != nil {
		t.Fatal(err)
	}
	// The ramp's change: its start (0.6 s) plus the lateness of its first
	// activation (t = 1.0 s), whose send is at most as late as the first
	// requests the server saw.
	if len(res.StageChanges) != 2 {
		t.Fatalf("%d stage changes, want 2 (one per stage after the first)", len(res.StageChanges))
	}
	if late := res.StageChanges[0].Sub(start.Add(600 * time.Millisecond)); res.StageChanges[0].IsZero() || late < 0 || late > 100*time.Millisecond {
		t.Errorf("ramp stage's change %v after its start, want its first activation's lateness, [0, 100 ms]", late)
	}
	var got []time.Duration
	for _, at := range first {
		got = append(got, at.Sub(start))
	}
	slices.Sort(got)
	// Per worker: slot 0 from the start, slot 1 when 1 + (t-0.6 s)·2.5/s
	// reaches 2 (t = 1.0 s), slot 2 when it reaches 3 (t = 1.4 s).
	want := []time.Duration{0, 0, 1000 * time.Millisecond, 1000 * time.Millisecond, 1400 * time.Millisecond, 1400 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("%d connections sent requests (first requests at %v), want %d", len(got), got, len(want))
	}
	// Never early; late only by scheduling (generous: a loaded machine
	// under the race detector).
	for i := range want {
		if got[i] < want[i]-time.Millisecond || got[i] > want[i]+100*time.Millisecond {
			t.Errorf("connection %d's first request at %v, want %v (+100 ms at most); all: %v", i, got[i], want[i], got)
		}
	}
	t.Logf("first requests at %v", got)
}

// TestRecordConnPhases: each new TCP connection records one connect and
// one handshake sample; a QUIC connection, whose handshake is its
// opening, records no connect (a regression recorded every TCP connect
// twice).
func TestRecordConnPhases(t *testing.T) {
	r := newRecorder(1)
	r.mu.Lock()
	r.recordConn(0, &connInfo{connect: 100, tls: true, handshake: 900})
	r.recordConn(0, &connInfo{connect: 120, tls: true, resumed: true, handshake: 300})
	r.recordConn(0, &connInfo{quic: true, tls: true, handshake: 700, transport: "QUIC v1"})
	r.mu.Unlock()
	s := r.swap(newSlot())
	if got := s.hists.Connect.Count(); got != 2 {
		t.Errorf("connect samples %d, want 2 (the TCP connections only)", got)
	}
	if full, resumed := s.hists.TLSFull.Count(), s.hists.TLSResumed.Count(); full != 2 || resumed != 1 {
		t.Errorf("handshake samples full %d, resumed %d, want 2 and 1", full, resumed)
	}
	if got := s.counts.ConnectionsOpened; got != 3 {
		t.Errorf("connections opened %d, want 3", got)
	}
}

// TestH2OpenLoopGrowsDuringStall: HTTP/2 open loop grows as HTTP/1.1 does.
// One connection of two stream slots, both stuck on a stalled server:
// requests still come due, so the engine opens connections (each with its
// stream slots) up to the cap; when the connection it adds stalls too,
// the late tickets count as growth refused.
func TestH2OpenLoopGrowsDuringStall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxConns int
		stalls   int64 // requests that stall their stream slots
	}{{"grows", 10, 2}, {"capped", 2, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv, _, ca := tlsTargetH2(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= tc.stalls {
					time.Sleep(time.Second)
				}
			})
			e := newEngine(t, plan.Plan{URL: srv.URL, Protocol: plan.H2, MaxStreams: 2, Connections: 1, MaxConnections: tc.maxConns,
				Load: plan.OpenLoop, Rate: 100, Duration: 1500 * time.Millisecond, Timeout: 5 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 1)
			res, total := runCounted(t, e)
			if tc.name == "capped" {
				// Every stream slot of both connections is held for about
				// 1 s of the 1.5-s window: some 90 tickets fall due
				// meanwhile, untaken.
				if total.GrowthRefused < 40 || total.ConnectionsOpened != 2 {
					t.Errorf("capped at 2: %d growth refused, %d connections opened; want at least 40 and 2", total.GrowthRefused, total.ConnectionsOpened)
				}
				return
			}
			if res.Issued < 140 {
				t.Errorf("issued %d of 150 scheduled: the stall must not hold back the schedule", res.Issued)
			}
			if total.ConnectionsOpened <= 1 || total.ConnectionsOpened > int64(tc.maxConns) {
				t.Errorf("connections opened %d, want more than 1 and at most the cap of %d", total.ConnectionsOpened, tc.maxConns)
			}
			if total.GrowthRefused != 0 || total.Missed > 30 {
				t.Errorf("%d growth refused, %d missed below the cap: want none and the few before the first growth", total.GrowthRefused, total.Missed)
			}
			t.Logf("%d connections, %d missed, %d issued", total.ConnectionsOpened, total.Missed, res.Issued)
		})
	}
}

package engine

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// runCollect runs e from start, calling EndWindow after endAfter (if > 0),
// and returns the result, the intervals' summed counts and the intervals.
// It fails the test if Run errs or takes longer than limit.
func runCollect(t *testing.T, e *Engine, start time.Time, endAfter, limit time.Duration) (Result, measure.Counts, []Interval, time.Time) {
	t.Helper()
	ended := make(chan time.Time, 1)
	if endAfter > 0 {
		timer := time.AfterFunc(time.Until(start.Add(endAfter)), func() {
			ended <- time.Now()
			e.EndWindow()
			e.EndWindow() // idempotent
		})
		defer timer.Stop()
	}
	var total measure.Counts
	var ivs []Interval
	var hcount int64
	t0 := time.Now()
	res, err := e.Run(context.Background(), start, func(iv Interval) {
		hcount += iv.Hists.Latency.Count()
		total.Add(&iv.Counts)
		iv.Hists = nil // valid only during emit
		ivs = append(ivs, iv)
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(t0); d > limit {
		t.Fatalf("Run took %v, want under %v", d, limit)
	}
	if hcount != total.Requests {
		t.Errorf("latency samples %d != requests %d", hcount, total.Requests)
	}
	var endedAt time.Time
	select {
	case endedAt = <-ended:
	default:
		if endAfter > 0 {
			t.Fatalf("Run returned before EndWindow was called at %v", endAfter)
		}
	}
	return res, total, ivs, endedAt
}

// checkIntervals checks that ivs are contiguous from start and end at the
// result's window end.
func checkIntervals(t *testing.T, ivs []Interval, start time.Time, interval time.Duration, res Result) {
	t.Helper()
	if len(ivs) == 0 {
		t.Fatal("no interval emitted")
	}
	for k, iv := range ivs {
		if iv.Index != k || !iv.Start.Equal(start.Add(time.Duration(k)*interval)) {
			t.Errorf("interval %d: index %d, starts at %v", k, iv.Index, iv.Start.Sub(start))
		}
		if k < len(ivs)-1 && iv.End.Sub(iv.Start) != interval {
			t.Errorf("interval %d is %v long, want %v (only the last is cut short)", k, iv.End.Sub(iv.Start), interval)
		}
	}
	if last := ivs[len(ivs)-1]; !last.End.Equal(res.WindowEnd) {
		t.Errorf("last interval ends at %v, window at %v", last.End.Sub(start), res.WindowEnd.Sub(start))
	}
}

// TestEndWindowClosedLoop: EndWindow in the middle of a 10 s closed-loop
// window ends it there: Run returns normally at once, the requests in
// flight finish and are counted, the window ends at the last request's end
// (a little after the call), and issued = requests + errors + in flight
// with nothing left in flight.
func TestEndWindowClosedLoop(t *testing.T) {
	srv, served, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // every connection has a request in flight at the stop
		_, _ = w.Write([]byte("hello"))
	})
	const interval = 500 * time.Millisecond
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 4, Duration: 10 * time.Second, Interval: interval, TLS: plan.TLS{CAPEM: ca}}, 4)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(50 * time.Millisecond)
	res, total, ivs, endedAt := runCollect(t, e, start, 1200*time.Millisecond, 4*time.Second)

	if !res.StoppedEarly {
		t.Error("StoppedEarly = false after EndWindow mid-window")
	}
	window := res.WindowEnd.Sub(start)
	stop := endedAt.Sub(start)
	t.Logf("EndWindow at %v; window %v; %d requests, issued %d, in flight %d, %d intervals", stop, window, total.Requests, res.Issued, res.InFlight, len(ivs))
	// The requests in flight at the call (20 ms each) end after it: the
	// window runs to the last of them, within the plan's timeout.
	if window < stop || window > stop+time.Second {
		t.Errorf("window %v, EndWindow at %v: want the last request's end, just after the call", window, stop)
	}
	checkIntervals(t, ivs, start, interval, res)
	if len(ivs) != 3 {
		t.Errorf("%d intervals, want 3 (0-0.5 s, 0.5-1 s, 1 s to the end)", len(ivs))
	}
	if total.Requests < 40 {
		t.Errorf("%d requests in about 1.2 s over 4 connections at 20 ms each, want at least 40", total.Requests)
	}
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued {
		t.Errorf("requests %d + errors %d + in flight %d = %d, want issued %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued)
	}
	if res.InFlight != 0 || total.ErrorTotal() != 0 {
		t.Errorf("in flight %d, errors %v: every request in flight at the stop must finish and count", res.InFlight, total.ErrorMap())
	}
	if got := served.Load(); got != res.Issued {
		t.Errorf("server saw %d requests, engine issued %d", got, res.Issued)
	}
	time.Sleep(100 * time.Millisecond)
	if got := served.Load(); got != res.Issued {
		t.Errorf("server saw %d requests 100 ms after Run returned, engine issued %d: requests sent after the window", got, res.Issued)
	}
}

// TestEndWindowOpenLoop: ending an open-loop window early counts as missed
// only the sends due before the call; those the schedule had after it are
// neither sent nor missed. Over HTTP/2 the tickets a session's pacer holds
// at the call (h2pacer.go) are given back as the slots' own are.
func TestEndWindowOpenLoop(t *testing.T) {
	t.Run("h1", func(t *testing.T) { testEndWindowOpenLoop(t, plan.H1) })
	t.Run("h2", func(t *testing.T) { testEndWindowOpenLoop(t, plan.H2) })
}

func testEndWindowOpenLoop(t *testing.T, proto plan.Protocol) {
	target := tlsTarget
	if proto == plan.H2 {
		target = tlsTargetH2
	}
	srv, served, ca := target(t, func(w http.ResponseWriter, r *http.Request) {})
	p := plan.Plan{URL: srv.URL, Connections: 4, Load: plan.OpenLoop, Rate: 200, Duration: 10 * time.Second, TLS: plan.TLS{CAPEM: ca}}
	if proto == plan.H2 {
		p.Protocol, p.MaxStreams, p.Connections = plan.H2, 4, 2
	}
	e := newEngine(t, p, p.Connections)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(50 * time.Millisecond)
	res, total, ivs, endedAt := runCollect(t, e, start, time.Second, 3*time.Second)
	stop := endedAt.Sub(start)
	t.Logf("EndWindow at %v; window %v; issued %d, missed %d", stop, res.WindowEnd.Sub(start), res.Issued, total.Missed)
	if !res.StoppedEarly {
		t.Error("StoppedEarly = false after EndWindow mid-window")
	}
	checkIntervals(t, ivs, start, time.Second, res)
	// About 200 sends were due by the call; the schedule's 1800 after it
	// must not show up as missed.
	if want := int64(200 * stop.Seconds()); res.Issued < want-15 || res.Issued > want+15 {
		t.Errorf("issued %d, want about %d (200/s until the call)", res.Issued, want)
	}
	if total.Missed > 20 {
		t.Errorf("missed %d: sends due after EndWindow were counted as missed", total.Missed)
	}
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued || served.Load() != res.Issued {
		t.Errorf("requests %d + errors %d + in flight %d = %d, issued %d, served %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued, served.Load())
	}
	if proto == plan.H2 {
		var chained int64
		for _, sl := range e.slots {
			chained += sl.(*h2conn).chained.Load()
		}
		if chained < res.Issued/2 {
			t.Errorf("%d of %d requests sent by the sessions' read loops and pacers, want at least half", chained, res.Issued)
		}
	}
}

// TestEndWindowCountMode: EndWindow ends a count-mode run before its count
// (StoppedEarly); after a count that ran out, it changes nothing.
func TestEndWindowCountMode(t *testing.T) {
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Requests: 10_000_000, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(50 * time.Millisecond)
	res, total, ivs, endedAt := runCollect(t, e, start, 500*time.Millisecond, 3*time.Second)
	if !res.StoppedEarly || total.Requests == 0 || res.Issued >= 10_000_000 {
		t.Errorf("stopped early %v, requests %d, issued %d", res.StoppedEarly, total.Requests, res.Issued)
	}
	if w, stop := res.WindowEnd.Sub(start), endedAt.Sub(start); w < stop || w > stop+time.Second {
		t.Errorf("window %v, EndWindow at %v", w, stop)
	}
	checkIntervals(t, ivs, start, time.Second, res)
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued {
		t.Errorf("requests %d + errors %d + in flight %d = %d, want issued %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued)
	}

	// A count that ran out is not stopped early, even if EndWindow
	// follows.
	e = newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Requests: 50, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, total, _, _ = runCollect(t, e, time.Now().Add(20*time.Millisecond), 0, 3*time.Second)
	e.EndWindow()
	if res.StoppedEarly || total.Requests != 50 {
		t.Errorf("count of 50 ran out: stopped early %v, requests %d", res.StoppedEarly, total.Requests)
	}
}

// TestEndWindowBeforeRun: called before Run, EndWindow makes Run issue
// nothing and report an empty window at its start.
func TestEndWindowBeforeRun(t *testing.T) {
	srv, served, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 2, Duration: 10 * time.Second, TLS: plan.TLS{CAPEM: ca}}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.EndWindow()
	start := time.Now().Add(20 * time.Millisecond)
	res, total, ivs, _ := runCollect(t, e, start, 0, 2*time.Second)
	if !res.StoppedEarly || res.Issued != 0 || total.Requests != 0 || served.Load() != 0 {
		t.Errorf("stopped early %v, issued %d, requests %d, served %d; want nothing issued", res.StoppedEarly, res.Issued, total.Requests, served.Load())
	}
	if !res.WindowEnd.Equal(start) || len(ivs) != 1 {
		t.Errorf("window ends %v after the start, %d intervals; want an empty window, one interval", res.WindowEnd.Sub(start), len(ivs))
	}
}

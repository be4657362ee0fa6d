package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestCaseC07ResetRecovery covers field case C07. A server that restarts
// every few seconds aborts all its keep-alive connections at once. wrk then
// counted one error per failed write (over a hundred thousand) and its
// throughput never came back properly. Here the server sends a TCP RST on
// every open connection at 2, 4, 6 and 8 s. What must hold: at most one
// error per connection per reset (16 × 4), each classified as reset or
// closed and never as a timeout; failed requests stay out of the latency
// histogram; the tool's issued count exceeds the server's received count
// by at most the requests the kernel dropped (≤ 64); every aborted
// connection is reopened once; each reset's errors show in the 100 ms
// progress interval of the reset; and from 200 ms after each reset every
// 100 ms bucket is back to ≥ 80 % of the throughput before it, throughput
// being measured against a control: the same load on a server that never
// resets, run in this process at the same time, so that other loads on
// the machine (which slow both alike) are not taken for a slow recovery.
// (Buckets in which the test process itself was stalled, or starved below
// two control requests per connection, are not judged; a bucket counts
// as low only when it is also below every undisturbed bucket, and only
// when the control completed ten requests per connection in it; a window
// fails on two low buckets, or when its sum is below 80 %.)
func TestCaseC07ResetRecovery(t *testing.T) {
	const (
		conns    = 16
		resets   = 4
		every    = 2 * time.Second
		duration = 10 * time.Second
		bucket   = 100 * time.Millisecond
	)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")

	var (
		mu    sync.Mutex
		open  = map[*net.TCPConn]bool{}
		first atomic.Int64 // unix nanos of the first request received
		armed = make(chan struct{})
	)
	// serve answers every request after 1 ms; with reset set, its
	// connections are the ones the resets abort.
	serve := func(reset bool) rawHandler {
		return func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			if reset {
				tcp, ok := c.(*tls.Conn).NetConn().(*net.TCPConn)
				if !ok {
					return
				}
				mu.Lock()
				open[tcp] = true
				mu.Unlock()
				defer func() {
					mu.Lock()
					delete(open, tcp)
					mu.Unlock()
				}()
			}
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				if reset && first.CompareAndSwap(0, time.Now().UnixNano()) {
					close(armed)
				}
				time.Sleep(time.Millisecond)
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		}
	}
	srv := startRaw(t, &tls.Config{}, serve(true))
	// The control: the same load against the same server, never reset,
	// run in this process at the same time. Throughput per 100 ms is
	// judged relative to it, bucket by bucket, so that other loads on the
	// machine, which slow both alike, are not taken for a slow recovery.
	ctlSrv := startRaw(t, &tls.Config{}, serve(false))

	// The reset schedule runs from the first request the server receives,
	// within a few ms of the run's start instant.
	var (
		resetAt []time.Time
		aborted []int
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		select {
		case <-armed:
		case <-stop:
			return
		}
		t0 := time.Unix(0, first.Load())
		for i := 1; i <= resets; i++ {
			timer := time.NewTimer(time.Until(t0.Add(time.Duration(i) * every)))
			select {
			case <-timer.C:
			case <-stop:
				timer.Stop()
				return
			}
			mu.Lock()
			now := time.Now()
			n := 0
			for tc := range open {
				_ = tc.SetLinger(0) // Close sends RST
				_ = tc.Close()
				delete(open, tc)
				n++
			}
			mu.Unlock()
			resetAt = append(resetAt, now)
			aborted = append(aborted, n)
		}
	}()
	stopResets := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	t.Cleanup(stopResets)

	watch := startSchedWatch()
	t.Cleanup(watch.stop)
	p := plan.Plan{Connections: conns, Duration: duration, Interval: bucket, TLS: plan.TLS{CAPEM: testCA(t).CAPEM}}
	var (
		ctl    caseRun
		ctlErr error
		ctlEnd = make(chan struct{})
	)
	// Under the race detector recovery is not judged (below): no control
	// then, which would only slow the run further.
	control := !c15RaceEnabled()
	cp := p
	cp.URL = ctlSrv.URL("/")
	go func() {
		defer close(ctlEnd)
		if control {
			ctl, ctlErr = runControl(cp, 1, 2)
		}
	}()
	p.URL = srv.URL("/")
	run := runCase(t, p, 1, 2)
	<-ctlEnd
	if ctlErr != nil {
		t.Fatalf("control run: %v", ctlErr)
	}
	stopResets()
	watch.stop()
	r := run.Report
	received := srv.Stats.Requests.Load()
	totalAborted := 0
	for _, n := range aborted {
		totalAborted += n
	}
	t.Logf("completed %d, errors %v, in flight %d, issued %d, server received %d; %d resets aborting %v connections; reconnects %d, server accepted %d; agent failures: %q",
		r.Requests, r.Errors, r.InFlight, r.Issued, received, len(resetAt), aborted, r.Reconnects, srv.Stats.Accepted.Load(), agentFailures(r))

	if len(resetAt) != resets {
		t.Fatalf("the server reset %d times during the run, want %d", len(resetAt), resets)
	}
	for i, n := range aborted {
		if n == 0 {
			t.Errorf("reset %d found no open connection to abort", i+1)
		}
	}

	// Errors: once per request, at most one per connection per reset,
	// reset or closed only.
	errs := r.ErrorTotal()
	if errs < 1 || errs > int64(totalAborted) {
		t.Errorf("errors = %d (%v), want 1 to %d (at most one per aborted connection)", errs, r.Errors, totalAborted)
	}
	for kind, n := range r.Errors {
		if kind != "reset" && kind != "closed" && n > 0 {
			t.Errorf("errors[%s] = %d: a reset connection must count as reset or closed only", kind, n)
		}
	}

	// Issued = server received + requests lost in the kernel (≤ 64).
	if lost := r.Issued - received; lost < 0 || lost > int64(totalAborted) {
		t.Errorf("issued %d - server received %d = %d, want 0 to %d", r.Issued, received, lost, totalAborted)
	}

	// Every aborted connection is reopened once, and nothing else is.
	if r.Reconnects != int64(totalAborted) {
		t.Errorf("reconnects = %d, want %d (one per aborted connection)", r.Reconnects, totalAborted)
	}
	if got, want := srv.Stats.Accepted.Load(), int64(conns+totalAborted); got != want {
		t.Errorf("server accepted %d connections, want %d (%d at the start + one per aborted connection)", got, want, conns)
	}

	// Failed requests are not latency samples.
	if r.Latency == nil || r.Latency.Count != r.Requests {
		t.Errorf("latency histogram = %+v, want count = completed = %d", r.Latency, r.Requests)
	} else if r.Latency.Max >= plan.DefaultTimeout.Microseconds() {
		t.Errorf("latency max = %d µs, at or above the %v timeout", r.Latency.Max, plan.DefaultTimeout)
	}
	if r.Status["200"] != r.Requests {
		t.Errorf("status %v, want every one of %d completed responses 200", r.Status, r.Requests)
	}

	// Recovery, on the per-100-ms progress buckets. Interval k covers
	// [start + k·100ms, start + (k+1)·100ms) of the coordinator's clock.
	reqs, errsAt := map[int]int64{}, map[int]int64{}
	last := -1
	var sum int64
	for _, p := range run.Progress {
		reqs[int(p.GetIndex())] = p.GetRequests()
		errsAt[int(p.GetIndex())] = p.GetErrors()
		last = max(last, int(p.GetIndex()))
		sum += p.GetRequests()
	}
	if want := int(duration/bucket) - 1; last != want || len(run.Progress) != want+1 {
		t.Errorf("progress has %d intervals ending at %d, want %d ending at %d (10 s in 100 ms intervals)", len(run.Progress), last, want+1, want)
	}
	if sum != r.Requests {
		t.Errorf("progress intervals hold %d requests, the report %d", sum, r.Requests)
	}
	// The control's interval j covers [its start + j·100ms, ...): the one
	// nearest interval k of the run is at k + its start offset.
	ctlReqs := map[int]int64{}
	for _, p := range ctl.Progress {
		ctlReqs[int(p.GetIndex())] = p.GetRequests()
	}
	shift := 0
	if control {
		shift = int(math.Round(float64(r.StartedAt.Sub(ctl.Report.StartedAt)) / float64(bucket)))
	}
	// starved reports whether the control completed fewer than two
	// requests per connection in interval k (about 900 in all on an idle
	// machine): this process was starved of CPU then, too few requests
	// to measure a ratio with. Without a control, never.
	starved := func(k int) bool { return control && ctlReqs[k+shift] < 2*conns }
	// rel is interval k's throughput relative to the control's at the
	// same time; ok is false when the process was starved.
	rel := func(k int) (float64, bool) {
		if starved(k) {
			return 0, false
		}
		return float64(reqs[k]) / float64(ctlReqs[k+shift]), true
	}

	// A bucket in which this test process itself stopped running for 40 ms
	// or more (another load on the machine, a GC pause) says nothing about
	// the tool's recovery: such buckets are not judged.
	start := r.StartedAt
	frozen := func(k int) bool {
		return watch.stalled(start.Add(time.Duration(k)*bucket), start.Add(time.Duration(k+1)*bucket), 40*time.Millisecond)
	}
	var series []string
	for k := 0; k <= last; k++ {
		mark := ""
		if frozen(k) {
			mark = "*"
		}
		series = append(series, fmt.Sprintf("%d:%d/%d|%d%s", k, reqs[k], errsAt[k], ctlReqs[k+shift], mark))
	}
	t.Logf("progress (interval:requests/errors|control's requests, * = test process stalled; control started %d intervals before): %s", shift, strings.Join(series, " "))

	type window struct {
		n               int     // the reset's number, from 1
		reset, from, to int     // interval of the reset; recovery buckets from..to
		baseline        float64 // throughput relative to the control in the second before
	}
	var windows []window
	var inWindows int64 // errors inside the resets' intervals
	minControl := 1.0   // lowest undisturbed bucket relative to its baseline
	for i, at := range resetAt {
		rk := int(at.Sub(start) / bucket)
		if rk < 10 {
			t.Fatalf("reset %d at %v after the start: too early for a baseline", i+1, at.Sub(start))
		}
		// A reset's errors end within a few ms of it: they belong to its
		// interval (or, at a boundary, the next; later only while this
		// process was stalled or starved, as the control shows it, and
		// could not see them), not to any other.
		end := rk + 1
		for end < rk+10 && (frozen(end) || starved(end)) {
			end++
		}
		var got int64
		var where []string
		for k := rk - 2; k <= end+2; k++ {
			if k >= rk && k <= end {
				got += errsAt[k]
			}
			where = append(where, fmt.Sprintf("#%d=%d", k, errsAt[k]))
		}
		// Each aborted connection with a request on it fails that request
		// once. One the reset caught between an answer and its next send
		// fails none if it waited IdleCheck there (a loaded machine's
		// scheduling gap): the engine sees the RST before writing and
		// reconnects, losing nothing. So at most every aborted connection,
		// and at least three quarters of them (16 connections busy at
		// ~9,000 requests/s have no gap that long but under load).
		inWindows += got
		if got > int64(aborted[i]) || got < int64(aborted[i])*3/4 {
			t.Errorf("reset %d at %v (interval %d): intervals %d-%d hold %d errors, want between 3/4 of and all the %d aborted connections (errors by interval: %s)",
				i+1, at.Sub(start).Round(time.Millisecond), rk, rk, end, got, aborted[i], strings.Join(where, " "))
		}
		if !control {
			continue
		}
		var before []float64
		for k := rk - 10; k < rk; k++ {
			if v, ok := rel(k); ok && !frozen(k) {
				before = append(before, v)
			}
		}
		if len(before) < 5 {
			t.Logf("reset %d: the test process stalled, or was starved, in most of the second before it; recovery not judged", i+1)
			continue
		}
		sorted := slices.Clone(before)
		slices.Sort(sorted)
		w := window{n: i + 1, reset: rk, baseline: sorted[len(sorted)/2]} // median of the second before
		if w.baseline == 0 {
			t.Errorf("reset %d: no request completed in the second before it", i+1)
			continue
		}
		minControl = min(minControl, sorted[0]/w.baseline)
		w.from = int((at.Add(200*time.Millisecond).Sub(start) + bucket - 1) / bucket)
		w.to = last
		if i+1 < len(resetAt) {
			w.to = int(resetAt[i+1].Sub(start)/bucket) - 1
		}
		windows = append(windows, w)
	}
	if inWindows != errs {
		t.Errorf("%d errors, %d of them in the resets' intervals: the others belong to no reset", errs, inWindows)
	}

	// Each bucket from 200 ms after a reset holds at least 80 % of the
	// baseline. On a machine busy with other work, undisturbed buckets
	// also dip now and then: a recovery bucket fails only when it is below
	// 80 % and below the lowest undisturbed bucket of the same run. Over
	// the whole recovery window the mean must reach 80 % regardless.
	if c15RaceEnabled() {
		// The race detector slows this whole process (client, server and
		// cluster) several times over and unevenly: per-100-ms throughput
		// then measures the detector. The recovery criterion is judged in
		// the run without it (make test-cases, in CI).
		t.Logf("recovery not judged under the race detector (make test-cases judges it)")
		return
	}
	floor := min(0.8, minControl)
	t.Logf("lowest undisturbed bucket: %.0f %% of its baseline; per-bucket floor %.0f %%", 100*minControl, 100*floor)
	for _, w := range windows {
		var low []string
		var run, control int64
		n := 0
		for k := w.from; k <= w.to; k++ {
			v, ok := rel(k)
			if !ok || frozen(k) {
				continue
			}
			run += reqs[k]
			control += ctlReqs[k+shift]
			n++
			// One bucket's ratio is judged when the control completed
			// ten requests per connection in it (about 900 in all on an
			// idle machine): below, a starved process's scheduling bursts
			// favour one client or the other for a whole 100 ms, and only
			// the window's sum (below) is judged.
			if v < floor*w.baseline && ctlReqs[k+shift] >= 10*conns {
				low = append(low, fmt.Sprintf("#%d=%d/%d", k, reqs[k], ctlReqs[k+shift]))
			}
		}
		if n == 0 {
			t.Logf("reset %d: the test process stalled in every recovery bucket; not judged", w.n)
			continue
		}
		// The floor is the lowest of the (up to 40) undisturbed buckets
		// before the resets, and some 68 are judged after them: by
		// chance alone about one of those falls below the lowest of the
		// others when the machine's load makes the ratio noisy (the
		// chance that a bucket is below the minimum of N is 1/(N+1)). A
		// window fails on two such buckets, or on its mean.
		if len(low) > 1 {
			t.Errorf("reset %d (interval %d): throughput %.2f × the control's in the second before; buckets %d-%d below %.0f %% of that (run/control): %s",
				w.n, w.reset, w.baseline, w.from, w.to, 100*floor, strings.Join(low, " "))
		}
		if mean := float64(run) / float64(control); mean < 0.8*w.baseline {
			t.Errorf("reset %d (interval %d): %.2f × the control's throughput over intervals %d-%d, below 80 %% of the %.2f × before it",
				w.n, w.reset, mean, w.from, w.to, w.baseline)
		}
	}
}

// schedWatch watches this process's scheduling, to tell a slow tool from
// a machine too busy to run the test (other loads, long GC pauses): a
// goroutine ticks every 5 ms and keeps the instants of its ticks. Used by
// the C07 and C17 tests.
type schedWatch struct {
	mu    sync.Mutex
	beats []time.Time
	quit  chan struct{}
	done  chan struct{}
}

func startSchedWatch() *schedWatch {
	s := &schedWatch{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tk.C:
				s.mu.Lock()
				s.beats = append(s.beats, time.Now())
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// stop ends the watch; it may be called more than once.
func (s *schedWatch) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// stalled reports whether the process went `gap` or more without a tick at
// some point within [from, to). Call after stop.
func (s *schedWatch) stalled(from, to time.Time, gap time.Duration) bool {
	beats := s.beats
	i, _ := slices.BinarySearchFunc(beats, from, func(b, t time.Time) int { return b.Compare(t) })
	for ; i < len(beats) && beats[i].Before(to.Add(gap)); i++ {
		if i > 0 && beats[i].Sub(beats[i-1]) >= gap && beats[i-1].Before(to) {
			return true
		}
	}
	return false
}

// lost returns the fraction of [from, to) in which the process did not
// run its ticker for more than 20 ms at a stretch (the excess over the
// 5 ms period). Call after stop.
func (s *schedWatch) lost(from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	var sum time.Duration
	beats := s.beats
	for i := 1; i < len(beats); i++ {
		a, b := beats[i-1], beats[i]
		if b.Sub(a) <= 20*time.Millisecond || !b.After(from) || !a.Before(to) {
			continue
		}
		a = a.Add(5 * time.Millisecond)
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			sum += b.Sub(a)
		}
	}
	return float64(sum) / float64(to.Sub(from))
}

// agentFailures lists the agents whose share ended early, with why (empty
// when none did), for the tests' logs.
func agentFailures(r *report.Report) string {
	var out []string
	for _, a := range r.AgentRows {
		if a.Error != "" {
			out = append(out, a.Name+": "+a.Error)
		}
	}
	return strings.Join(out, "; ")
}

// runControl runs p as runCase does, on a goroutine of its own: it calls
// no testing.T method, and returns its error.
func runControl(p plan.Plan, agents, workers int) (caseRun, error) {
	var out caseRun
	c, err := localcluster.Start(context.Background(), agents, workers, quietLogger())
	if err != nil {
		return out, err
	}
	defer c.Close()
	start := time.Now()
	res, err := c.Coordinator.RunPlan(context.Background(), p, func(pr *pb.Progress) { out.Progress = append(out.Progress, pr) })
	out.Elapsed = time.Since(start)
	if err != nil {
		return out, err
	}
	out.Report, err = wire.ReportFromResult(res)
	return out, err
}

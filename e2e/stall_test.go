package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestBacklogStallNotServerBound: a server good for thousands of requests
// per second that pauses once for 150 ms, 1.3 s into a 3-s open-loop run at
// 500/s on 4 connections, holds every connection while about 75 sends come
// due: they are backlogged, over 1 % of the 1,500, all ending in the
// second interval. The report calls it a stall in that interval, not
// server-bound (a pause of the server and one of the agent look alike
// from the client, so it blames neither), unless the in-process agent was
// itself late on a loaded machine (then client-bound, which it says).
func TestBacklogStallNotServerBound(t *testing.T) {
	var once sync.Once
	var mu sync.Mutex
	var pauseFrom, pauseTo time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			mu.Lock()
			pauseFrom = time.Now().Add(1300 * time.Millisecond)
			pauseTo = pauseFrom.Add(150 * time.Millisecond)
			mu.Unlock()
		})
		mu.Lock()
		from, to := pauseFrom, pauseTo
		mu.Unlock()
		if now := time.Now(); !now.Before(from) && now.Before(to) {
			time.Sleep(to.Sub(now)) // the pause: every request arriving in it waits for its end
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	run := runCase(t, plan.Plan{URL: srv.URL + "/", Load: plan.OpenLoop, Rate: 500, Connections: 4, Duration: 3 * time.Second, Timeout: 2 * time.Second}, 1, 1)
	r := run.Report
	t.Logf("backlogged %d, missed %d, unsent %d, queued %d of %d; stall %q; server-bound %v %q; client-bound %q",
		r.Backlogged, r.Missed, r.Unsent, r.Queued, r.Issued, r.Stall, r.ServerBound, r.ServerBoundReasons, r.ClientBoundReasons)
	if r.Backlogged < 30 || r.Queued < r.Backlogged {
		t.Fatalf("backlogged %d, queued %d: want the pause's sends (about 75) backlogged, each queued", r.Backlogged, r.Queued)
	}
	if r.ServerBound {
		t.Errorf("server-bound %q: a 150-ms pause is a stall, not a limit", r.ServerBoundReasons)
	}
	if r.ClientBound {
		t.Logf("client-bound (the in-process agent was late on this machine): the stall is not judged")
		return
	}
	if !strings.Contains(r.Stall, "ending in the interval at 1.00s-2.00s: a stall of the server or of the agents") {
		t.Errorf("stall %q: want the pause named, in the interval at 1.00s-2.00s", r.Stall)
	}
}

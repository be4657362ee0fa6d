package engine

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// h3Peaks is a handler that counts requests per path and, per client
// address (one per QUIC connection: each has a UDP socket of its own), the
// most requests it was answering at once.
type h3Peaks struct {
	mu    sync.Mutex
	now   map[string]int // requests open per client address
	peak  map[string]int
	paths map[string]int64
	hold  time.Duration // each request's service time
	next  func(w http.ResponseWriter, r *http.Request)
}

func newH3Peaks(hold time.Duration, next func(w http.ResponseWriter, r *http.Request)) *h3Peaks {
	return &h3Peaks{now: map[string]int{}, peak: map[string]int{}, paths: map[string]int64{}, hold: hold, next: next}
}

func (h *h3Peaks) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.paths[r.URL.Path]++
	h.now[r.RemoteAddr]++
	h.peak[r.RemoteAddr] = max(h.peak[r.RemoteAddr], h.now[r.RemoteAddr])
	h.mu.Unlock()
	time.Sleep(h.hold)
	h.mu.Lock()
	h.now[r.RemoteAddr]--
	h.mu.Unlock()
	h.next(w, r)
}

// peaks returns the most requests open at once on each connection.
func (h *h3Peaks) peaks() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]int{}
	for k, v := range h.peak {
		m[k] = v
	}
	return m
}

func (h *h3Peaks) path(p string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paths[p]
}

// TestHTTP3MaxStreamsCount: -c 2 -m 4 in count mode sends exactly the
// count over the 2 prepared QUIC connections, and each connection carries
// its 4 stream slots' requests at once, never more.
func TestHTTP3MaxStreamsCount(t *testing.T) {
	h := newH3Peaks(20*time.Millisecond, hello)
	s, ca := h3Target(t, h.serve)
	p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxStreams: 4, Requests: 200, Interval: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: ca}}
	total, res, _, _ := runH3(t, p, 2)
	checkH3Exact(t, s, total, res)
	if total.Requests != 200 || res.Issued != 200 || res.InFlight != 0 {
		t.Errorf("requests %d, issued %d, in flight %d: want the count, 200", total.Requests, res.Issued, res.InFlight)
	}
	if total.ConnectionsOpened != 2 || total.Reconnects != 0 || s.Conns.Load() != 2 {
		t.Errorf("%d connections opened (%d reconnects), server accepted %d: want the 2 prepared", total.ConnectionsOpened, total.Reconnects, s.Conns.Load())
	}
	peaks := h.peaks()
	if len(peaks) != 2 {
		t.Errorf("requests came from %d client addresses, want the 2 connections: %v", len(peaks), peaks)
	}
	for addr, n := range peaks {
		if n != 4 {
			t.Errorf("connection %s had %d requests open at once at most, want the 4 stream slots (-m 4)", addr, n)
		}
	}
}

// TestHTTP3MaxStreamsOpenLoop: at a rate, -c 2 -m 4 takes every ticket of
// the schedule (sent or counted unsent) on the 2 connections, the server
// seeing each request sent, with more than one stream open at once on a
// connection.
func TestHTTP3MaxStreamsOpenLoop(t *testing.T) {
	h := newH3Peaks(15*time.Millisecond, hello)
	s, ca := h3Target(t, h.serve)
	p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxStreams: 4, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 300, TLS: plan.TLS{CAPEM: ca}}
	total, res, _, late := runH3(t, p, 2)
	checkH3Exact(t, s, total, res)
	checkOpenTickets(t, total, res, late, 300)
	if total.ConnectionsOpened != 2 || s.Conns.Load() != 2 {
		t.Errorf("%d connections opened, server accepted %d: want the 2 prepared (max_connections 2)", total.ConnectionsOpened, s.Conns.Load())
	}
	for addr, n := range h.peaks() {
		if n < 2 || n > 4 {
			t.Errorf("connection %s had %d requests open at once at most, want 2 to 4 (-m 4, 300/s of 15 ms each over 2 connections)", addr, n)
		}
	}
}

// TestHTTP3Redirects: over HTTP/3 a redirect is followed on the slot's
// connection, each hop a request the server counts on its path, the
// exchange one request in the report and its hops in Redirects; a loop
// ends after max_redirects hops in the redirect error kind.
func TestHTTP3Redirects(t *testing.T) {
	h := newH3Peaks(0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/one":
			http.Redirect(w, r, "/end", http.StatusFound)
		case "/three":
			http.Redirect(w, r, "/a?x=1", http.StatusMovedPermanently)
		case "/a":
			http.Redirect(w, r, "https://"+r.Host+"/b", http.StatusTemporaryRedirect)
		case "/b":
			http.Redirect(w, r, "end", http.StatusSeeOther)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = w.Write([]byte("hello world"))
		}
	})
	s, ca := h3Target(t, h.serve)
	for _, tc := range []struct {
		path        string
		hops        int64 // per exchange
		paths       []string
		redirectErr bool
	}{
		{"/one", 1, []string{"/one", "/end"}, false},
		{"/three", 3, []string{"/three", "/a", "/b", "/end"}, false},
		{"/loop", 4, nil, true}, // max_redirects 4: 1 + 4 requests, the fifth 302 not followed
	} {
		t.Run(tc.path[1:], func(t *testing.T) {
			before := map[string]int64{}
			for _, p := range append(tc.paths, tc.path) {
				before[p] = h.path(p)
			}
			served := s.Requests.Load()
			p := plan.Plan{URL: s.URL + tc.path, Protocol: plan.H3, Connections: 2, MaxStreams: 2, MaxRedirects: 4, Requests: 40,
				Interval: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: ca}}
			total, res, _, _ := runH3(t, p, 2)
			if res.Issued != 40 || res.InFlight != 0 {
				t.Fatalf("issued %d, in flight %d: want the count, 40", res.Issued, res.InFlight)
			}
			if total.Redirects != 40*tc.hops {
				t.Errorf("redirects %d, want %d hops for each of the 40 exchanges", total.Redirects, 40*tc.hops)
			}
			if got := s.Requests.Load() - served; got != res.Issued+total.Redirects {
				t.Errorf("server handled %d requests, engine issued %d and followed %d hops", got, res.Issued, total.Redirects)
			}
			if tc.redirectErr {
				if total.Errors[measure.ErrRedirect] != 40 || total.Requests != 0 {
					t.Errorf("errors %v, requests %d: want the 40 exchanges in redirect", total.ErrorMap(), total.Requests)
				}
				if got := h.path("/loop") - before["/loop"]; got != 40*5 {
					t.Errorf("server saw /loop %d times, want 40 × (1 + 4 hops)", got)
				}
				return
			}
			if total.Requests != 40 || total.ErrorTotal() != 0 || total.Status[200] != 40 {
				t.Errorf("requests %d (status %v), errors %v: want 40 answered 200", total.Requests, total.Status, total.ErrorMap())
			}
			for _, p := range tc.paths {
				if got := h.path(p) - before[p]; got != 40 {
					t.Errorf("server saw %s %d times, want once per exchange (40)", p, got)
				}
			}
			if total.BodyBytes < 40*11 {
				t.Errorf("body bytes %d, want at least the 40 final bodies of 11 bytes", total.BodyBytes)
			}
			if total.ConnectionsOpened != 2 {
				t.Errorf("%d connections opened: hops go on the slot's connection (2)", total.ConnectionsOpened)
			}
		})
	}
}

package e2e

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/h3test"
	"github.com/phalanxload/phalanx/internal/plan"
)

// redirectServer is an HTTPS test server whose paths redirect: /a to /b
// (one hop), /s0 to /s1 to /s2 (relative, absolute, 307) to /s3 (three
// hops), /loop1 and /loop2 to each other, /away to another origin; the
// rest answer 200. It counts the requests of each path. It speaks HTTP/1.1,
// HTTP/2 (ALPN h2) or, for plan.H3, HTTP/3 (internal/h3test).
type redirectServer struct {
	URL  string // https://127.0.0.1:PORT
	mu   sync.Mutex
	hits map[string]int64
}

func startRedirectServer(t *testing.T, proto plan.Protocol) *redirectServer {
	t.Helper()
	s := &redirectServer{hits: map[string]int64{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/s0":
			http.Redirect(w, r, "s1", http.StatusMovedPermanently)
		case "/s1":
			http.Redirect(w, r, s.URL+"/s2", http.StatusSeeOther)
		case "/s2":
			http.Redirect(w, r, "/s3?x=1", http.StatusTemporaryRedirect)
		case "/loop1":
			http.Redirect(w, r, "/loop2", http.StatusFound)
		case "/loop2":
			http.Redirect(w, r, "/loop1", http.StatusFound)
		case "/away":
			http.Redirect(w, r, strings.Replace(s.URL, "127.0.0.1", "localhost", 1)+"/b", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	if proto == plan.H3 {
		s.URL = h3test.Start(t, testCA(t).Cert, h).URL
		return s
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = proto == plan.H2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{testCA(t).Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *redirectServer) counts() (map[string]int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, total := map[string]int64{}, int64(0)
	for p, n := range s.hits {
		out[p] = n
		total += n
	}
	return out, total
}

// TestRedirects: with --max-redirects, one hop and three hops are followed
// (each exchange one completed request, its hops counted in redirects, so
// requests + redirects is the server's count, path by path); a loop ends
// in the redirect error kind after N hops, promptly; a Location on another
// origin is the redirect error, never sent; and with 0 a 3xx is the
// response, as wrk; over HTTP/1.1, HTTP/2 and HTTP/3.
func TestRedirects(t *testing.T) {
	for _, proto := range []plan.Protocol{plan.H1, plan.H2, plan.H3} {
		t.Run(proto.String(), func(t *testing.T) { testRedirects(t, proto) })
	}
}

func testRedirects(t *testing.T, proto plan.Protocol) {
	const n = 200
	for _, c := range []struct {
		name, path  string
		max         int
		status      string // the final responses' status, "" when every exchange fails
		errors      int64
		redirects   int64
		serverPaths map[string]int64
	}{
		{"one_hop", "/a", 1, "200", 0, n, map[string]int64{"/a": n, "/b": n}},
		{"three_hops", "/s0", 5, "200", 0, 3 * n, map[string]int64{"/s0": n, "/s1": n, "/s2": n, "/s3": n}},
		{"loop", "/loop1", 3, "", n, 3 * n, map[string]int64{"/loop1": 2 * n, "/loop2": 2 * n}},
		{"other_origin", "/away", 3, "", n, 0, map[string]int64{"/away": n}},
		{"not_followed", "/a", 0, "302", 0, 0, map[string]int64{"/a": n}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startRedirectServer(t, proto)
			run := runCase(t, plan.Plan{URL: srv.URL + c.path, Connections: 4, Requests: n, MaxRedirects: c.max, Protocol: proto}, 1, 2)
			r := run.Report
			hits, total := srv.counts()
			t.Logf("%s in %v: requests %d, status %v, errors %v, redirects %d; server %v", c.name, run.Elapsed, r.Requests, r.Status, r.Errors, r.Redirects, hits)
			if f := agentFailures(r); f != "" {
				t.Fatalf("agent failures: %s", f)
			}
			wantReq := int64(n) - c.errors
			if r.Requests != wantReq || (c.status != "" && r.Status[c.status] != wantReq) || r.Errors["redirect"] != c.errors || r.ErrorTotal() != c.errors {
				t.Errorf("requests %d, status %v, errors %v: want %d of status %q, %d redirect errors", r.Requests, r.Status, r.Errors, wantReq, c.status, c.errors)
			}
			if r.Redirects != c.redirects {
				t.Errorf("redirects %d, want %d", r.Redirects, c.redirects)
			}
			for p, want := range c.serverPaths {
				if hits[p] != want {
					t.Errorf("server saw %s %d times, want %d", p, hits[p], want)
				}
			}
			// Every request the server received is an exchange's first or a
			// followed hop: the report adds up against its log.
			if got := r.Requests + r.ErrorTotal() + r.Redirects; got != total {
				t.Errorf("requests %d + errors %d + redirects %d = %d, server received %d", r.Requests, r.ErrorTotal(), r.Redirects, got, total)
			}
			if r.Latency != nil && r.Latency.Count != r.Requests {
				t.Errorf("latency samples %d, want one per exchange (%d)", r.Latency.Count, r.Requests)
			}
			if run.Elapsed > 20*time.Second {
				t.Errorf("run took %v: a redirect must end promptly", run.Elapsed)
			}
		})
	}
}

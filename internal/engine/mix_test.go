package engine

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCountModeMixExact: in count mode a request's mix position is its
// global index, so a 1:2:1:3 mix over 7,000 requests split over three
// agents' shares of two workers and unequal connection counts holds exactly
// 1000/2000/1000/3000 of each request at the server and in the reports,
// over HTTP/1.1 and HTTP/2 (issue 17, item 5; each connection cycling on
// its own gave 1001/1999/1000/3000).
func TestCountModeMixExact(t *testing.T) {
	for name, proto := range map[string]plan.Protocol{"http1.1": plan.H1, "h2": plan.H2} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			paths := map[string]int64{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths[r.URL.Path]++
				mu.Unlock()
				w.WriteHeader(200 + len(r.URL.Path)) // the report tells the paths apart: /a 202, /bb 203...
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			ca := pemCert(srv.Certificate().Raw)
			const n = 7000
			p := plan.Plan{URL: srv.URL + "/", Protocol: proto, Connections: 7, MaxStreams: 3, Requests: n, TLS: plan.TLS{CAPEM: ca},
				Mix: []plan.Request{{URL: srv.URL + "/a", Weight: 1}, {URL: srv.URL + "/bb", Weight: 2}, {URL: srv.URL + "/ccc", Weight: 1}, {URL: srv.URL + "/dddd", Weight: 3}}}
			if proto == plan.H1 {
				p.MaxStreams = 0
			}
			p.SetDefaults()
			var total measure.Counts
			for _, share := range plan.Shares("t", p, 3) {
				e, err := New(context.Background(), Config{Share: share, Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				_, c := runCounted(t, e)
				e.Close()
				total.Add(&c)
			}
			want := map[string]int64{"/a": 1000, "/bb": 2000, "/ccc": 1000, "/dddd": 3000}
			if !maps.Equal(paths, want) {
				t.Errorf("server saw %v, want %v", paths, want)
			}
			if got := total.StatusMap(); !maps.Equal(got, map[int]int64{202: 1000, 203: 2000, 204: 1000, 205: 3000}) || total.ErrorTotal() != 0 {
				t.Errorf("reports: statuses %v, errors %v, want 1000/2000/1000/3000 as 202/203/204/205", got, total.ErrorMap())
			}
		})
	}
}

package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestH2CPriorKnowledge: HTTP/2 on an http:// URL speaks h2c with prior
// knowledge (as h2load does): every request reaches a cleartext HTTP/2
// server as HTTP/2 with scheme http, several streams at once per
// connection, and no connection is upgraded from HTTP/1.1.
func TestH2CPriorKnowledge(t *testing.T) {
	var n, notH2, upgrades, active, maxActive atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.ProtoMajor != 2 || r.TLS != nil {
			notH2.Add(1)
		}
		if r.Header.Get("Upgrade") != "" {
			upgrades.Add(1)
		}
		a := active.Add(1)
		for m := maxActive.Load(); a > m && !maxActive.CompareAndSwap(m, a); m = maxActive.Load() {
		}
		time.Sleep(time.Millisecond)
		active.Add(-1)
		_, _ = w.Write([]byte("h2c body"))
	})
	// net/http's cleartext HTTP/2 with prior knowledge (Go 1.24's
	// Protocols, which replaced golang.org/x/net/http2/h2c); no HTTP/1.1,
	// so an HTTP/1.1 request or an Upgrade would fail.
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	e := newEngine(t, plan.Plan{URL: srv.URL + "/h2c", Connections: 2, Protocol: plan.H2, MaxStreams: 4, Requests: 400}, 2)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	res, err := e.Run(context.Background(), time.Now(), func(iv Interval) { total.Add(&iv.Counts) })
	if err != nil {
		t.Fatal(err)
	}
	if total.Requests != 400 || total.Status[200] != 400 || n.Load() != 400 || notH2.Load() != 0 || upgrades.Load() != 0 {
		t.Fatalf("requests %d, 200s %d, server %d (not HTTP/2: %d, upgrades %d); errors %v",
			total.Requests, total.Status[200], n.Load(), notH2.Load(), upgrades.Load(), total.ErrorMap())
	}
	if total.ConnectionsOpened != 2 || res.MaxStreams != 4 || maxActive.Load() < 2 {
		t.Errorf("connections %d, effective streams %d, server saw at most %d concurrent; want 2, 4, several", total.ConnectionsOpened, res.MaxStreams, maxActive.Load())
	}
}

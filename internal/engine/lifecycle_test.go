package engine

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// engineGoroutines returns the stacks of live goroutines running in an
// HTTP/2 session or slot of this package.
func engineGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "engine.(*h2session)") || strings.Contains(g, "engine.(*h2conn)") {
			out = append(out, g)
		}
	}
	return out
}

// TestHTTP2GoroutinesJoined: every HTTP/2 goroutine (a session's reader and
// flusher, the stream slots) has exited when Close returns after Prepare,
// and when Run returns: their owners join them, nothing is left to exit
// later. No retry: the check runs at once.
func TestHTTP2GoroutinesJoined(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p := plan.Plan{URL: srv.URL, Connections: 3, Protocol: plan.H2, MaxStreams: 4, TLS: plan.TLS{CAPEM: ca}}

	e := newEngine(t, p, 3)
	if prep, err := e.Prepare(context.Background()); err != nil || prep.Connections != 3 {
		t.Fatalf("Prepare = %+v, %v", prep, err)
	}
	if len(engineGoroutines()) == 0 {
		t.Fatal("no session goroutines after Prepare: the check below would prove nothing")
	}
	e.Close()
	if g := engineGoroutines(); len(g) > 0 {
		t.Fatalf("%d HTTP/2 goroutines outlive Close:\n%s", len(g), strings.Join(g, "\n\n"))
	}

	p.Requests, p.Duration = 300, 0
	e = newEngine(t, p, 3)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), time.Now(), func(Interval) {}); err != nil {
		t.Fatal(err)
	}
	if g := engineGoroutines(); len(g) > 0 {
		t.Fatalf("%d HTTP/2 goroutines outlive Run:\n%s", len(g), strings.Join(g, "\n\n"))
	}
}

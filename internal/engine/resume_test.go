package engine

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// runResume runs 40 short-connection requests with session resumption at
// ratio against srv and returns the counts.
func runResume(t *testing.T, srv *httptest.Server, ratio float64) measure.Counts {
	t.Helper()
	e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 1, Requests: 40, NoKeepAlive: true,
		TLS: plan.TLS{Insecure: true, Resume: true, ResumeRatio: ratio}}, 1)
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	if _, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) { total.Add(&iv.Counts) }); err != nil {
		t.Fatal(err)
	}
	if total.ErrorTotal() != 0 {
		t.Fatalf("errors %v", total.ErrorMap())
	}
	return total
}

// TestResumeRatio: at ratio 0.5 half the handshakes offer the cached
// session and the server resumes them (all but those before a session was
// cached); at ratio 0 (always offer) a server whose ticket key changes on
// every connection refuses every offer, and each is counted refused.
func TestResumeRatio(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := runResume(t, srv, 0.5)
	t.Logf("ratio 0.5: %d full, %d resumed, %d refused", c.HandshakesFull, c.HandshakesResumed, c.HandshakesRefused)
	if n := c.HandshakesFull + c.HandshakesResumed; n != 40 || c.HandshakesResumed < 18 || c.HandshakesResumed > 20 || c.HandshakesRefused != 0 {
		t.Errorf("ratio 0.5 over %d handshakes: %d resumed, %d refused: want 18-20 resumed, none refused", n, c.HandshakesResumed, c.HandshakesRefused)
	}

	rotating := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	rotating.TLS = &tls.Config{}
	rotating.StartTLS()
	defer rotating.Close()
	base := rotating.TLS.Clone()
	rotating.TLS.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := base.Clone()
		var key [32]byte
		_, _ = rand.Read(key[:])
		cfg.SetSessionTicketKeys([][32]byte{key})
		return cfg, nil
	}
	c = runResume(t, rotating, 0)
	t.Logf("refusing server: %d full, %d resumed, %d refused", c.HandshakesFull, c.HandshakesResumed, c.HandshakesRefused)
	if c.HandshakesResumed != 0 || c.HandshakesRefused < 38 || c.HandshakesRefused >= c.HandshakesFull {
		t.Errorf("refusing server: %d full, %d resumed, %d refused: want none resumed, all but the first 1-2 refused", c.HandshakesFull, c.HandshakesResumed, c.HandshakesRefused)
	}
}

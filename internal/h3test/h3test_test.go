package h3test

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// TestEarlyRequests: a request quic-go's client sends in 0-RTT (GET_0RTT
// on a connection resuming a session) is counted in EarlyRequests and its
// connection in Early; the full handshake's request and a second request
// on the 0-RTT connection are not.
func TestEarlyRequests(t *testing.T) {
	b, err := tlsgen.New()
	if err != nil {
		t.Fatal(err)
	}
	s := Start(t, b.Cert, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	conf := b.ClientConfig()
	conf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	get := func(method string) {
		t.Helper()
		tr := &http3.Transport{TLSClientConfig: conf}
		defer tr.Close()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for _, m := range []string{method, http.MethodGet} {
			req, err := http.NewRequest(m, s.URL+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", m, s.URL, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	get(http.MethodGet) // full handshake: the session ticket for the next
	if !WaitFor(func() bool { return s.Conns.Load() == 1 && s.Requests.Load() == 2 }) {
		t.Fatalf("first connection: %d conns, %d requests", s.Conns.Load(), s.Requests.Load())
	}
	get(http3.MethodGet0RTT)
	if !WaitFor(func() bool { return s.Early.Load() == 1 }) {
		t.Fatalf("0-RTT connection not counted: %d conns, %d resumed, %d early", s.Conns.Load(), s.Resumed.Load(), s.Early.Load())
	}
	if got := s.EarlyRequests.Load(); got != 1 || s.Requests.Load() != 4 || s.Resumed.Load() != 1 {
		t.Errorf("EarlyRequests %d, Requests %d, Resumed %d; want 1 (the GET_0RTT), 4, 1", got, s.Requests.Load(), s.Resumed.Load())
	}
}

// Package h3test is a fixture for tests: an HTTP/3 server on quic-go
// (RFC 9114 over QUIC v1) on 127.0.0.1 that counts what it saw, QUIC
// connections, resumed handshakes, 0-RTT connections and requests, so that
// a test can compare them with the engine's report exactly. It starts no
// goroutine that its cleanup does not join, except quic-go's own, which
// end when the server closes.
package h3test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Server is a running HTTP/3 test server.
type Server struct {
	// URL is "https://127.0.0.1:PORT" (UDP).
	URL string
	// Conns counts QUIC connections accepted; Resumed those whose TLS
	// handshake resumed a session, Early those that used 0-RTT (both
	// counted once the handshake completes); Requests the requests
	// handled (before the handler runs); EarlyRequests those of them on
	// the first request stream (ID 0) of a connection that accepted 0-RTT:
	// the request a client sends in 0-RTT when it sends one (quic-go's
	// server gives no per-stream flag, so a client that sends its first
	// request only after an accepted 0-RTT handshake is miscounted here).
	// A handler's request waits for its connection's handshake before it
	// is counted in EarlyRequests and before h runs.
	Conns, Resumed, Early, Requests, EarlyRequests atomic.Int64
	// Reject0RTT, while set, makes the server reject 0-RTT (RFC 9001
	// section 4.6.2) on connections that offer it, still resuming their
	// session: their 0-RTT requests are discarded unprocessed. Tickets
	// still allow 0-RTT, so clients keep offering it.
	Reject0RTT atomic.Bool
}

// streamIDer is the request body of quic-go's http3 server.
type streamIDer interface{ StreamID() quic.StreamID }

// connKey is the request context's key of its QUIC connection.
type connKey struct{}

// Start starts an HTTP/3 server with cert that runs h on every request,
// with 0-RTT allowed. t's cleanup closes it and every connection and joins
// its goroutines.
func Start(t testing.TB, cert tls.Certificate, h http.Handler) *Server {
	t.Helper()
	s := &Server{}
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: udp}
	base := &tls.Config{Certificates: []tls.Certificate{cert}}
	// Fixed ticket keys: every clone of base (quic-go's and http3's)
	// decrypts what any issued.
	base.SetSessionTicketKeys([][32]byte{{1}})
	base.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := base.DecryptTicket(identity, cs)
		if ss != nil && s.Reject0RTT.Load() {
			ss.EarlyData = false
		}
		return ss, err
	}
	tlsConf := http3.ConfigureTLSConfig(base)
	ln, err := tr.ListenEarly(tlsConf, &quic.Config{Allow0RTT: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.Requests.Add(1)
			if c, ok := r.Context().Value(connKey{}).(*quic.Conn); ok {
				select {
				case <-c.HandshakeComplete():
					if b, ok := r.Body.(streamIDer); ok && b.StreamID() == 0 && c.ConnectionState().Used0RTT {
						s.EarlyRequests.Add(1)
					}
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		}),
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[*quic.Conn]bool{}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.CloseWithError(0, "")
		}
		mu.Unlock()
		wg.Wait()
		_ = srv.Close()
		_ = tr.Close()
		_ = udp.Close()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			s.Conns.Add(1)
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(2)
			go func() { // count the handshake's outcome
				defer wg.Done()
				select {
				case <-c.HandshakeComplete():
				case <-c.Context().Done():
				}
				// Both may be ready (a client that closes right after its
				// request): a completed handshake counts all the same.
				select {
				case <-c.HandshakeComplete():
					st := c.ConnectionState()
					if st.TLS.DidResume {
						s.Resumed.Add(1)
					}
					if st.Used0RTT {
						s.Early.Add(1)
					}
				default:
				}
			}()
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				if err := srv.ServeQUICConn(c); err != nil && !errors.Is(err, http.ErrServerClosed) {
					t.Logf("h3test: %v", err)
				}
			}()
		}
	}()
	s.URL = "https://" + udp.LocalAddr().String()
	return s
}

// WaitFor retries cond until it holds or 5 s pass, and reports whether it
// held: the server counts connections and handshakes on goroutines of its
// own, which may lag the client's return.
func WaitFor(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

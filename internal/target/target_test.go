package target

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// startServer creates a Server on 127.0.0.1:0 with a fresh tlsgen bundle,
// runs it, and registers a cleanup that cancels it and checks Run's result.
// It returns the server, the bundle and a stop function that cancels Run and
// returns its error (the cleanup then only checks that it was called or
// calls it itself).
func startServer(t *testing.T, cfg Config) (*Server, *tlsgen.Bundle, func() error) {
	t.Helper()
	b, err := tlsgen.New()
	if err != nil {
		t.Fatalf("tlsgen.New: %v", err)
	}
	cfg.Cert = b.Cert
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var (
		stopped bool
		runErr  error
	)
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(ShutdownTimeout + 3*time.Second):
				runErr = errors.New("Run did not return after cancel")
			}
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, b, stop
}

func client(b *tlsgen.Bundle, h2 bool) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   b.ClientConfig(),
			ForceAttemptHTTP2: h2,
		},
	}
}

// get performs one request and returns the response with its body read.
func get(t *testing.T, c *http.Client, method, url string, closeConn bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = closeConn
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, body
}

func TestKeepAliveCountsExactly(t *testing.T) {
	s, b, stop := startServer(t, Config{})
	c := client(b, false)
	defer c.CloseIdleConnections()

	want := DefaultBody()
	const n = 25
	for i := range n {
		resp, body := get(t, c, http.MethodGet, s.URL()+"path/"+strconv.Itoa(i), false)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if resp.Proto != "HTTP/1.1" {
			t.Fatalf("request %d: proto %s, want HTTP/1.1", i, resp.Proto)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("Content-Type = %q", ct)
		}
		if resp.ContentLength != int64(len(want)) {
			t.Fatalf("ContentLength = %d, want %d", resp.ContentLength, len(want))
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("request %d: body differs (%d bytes)", i, len(body))
		}
	}
	if got := s.Requests(); got != n {
		t.Errorf("Requests() = %d, want %d", got, n)
	}
	if got := s.Connections(); got != 1 {
		t.Errorf("Connections() = %d, want 1 (keep-alive)", got)
	}
	if len(want) != DefaultBodySize {
		t.Errorf("DefaultBody is %d bytes, want %d", len(want), DefaultBodySize)
	}
	if !bytes.HasPrefix(want, []byte("<!DOCTYPE html>")) || !bytes.HasSuffix(want, []byte("</html>\n")) {
		t.Errorf("DefaultBody is not an HTML page: %q", want)
	}

	// The idle keep-alive connection is still open: Run must close it and
	// return nil promptly.
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if d := time.Since(start); d > ShutdownTimeout {
		t.Errorf("graceful shutdown took %v with only idle connections", d)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("listener still accepting after Run returned")
	}
}

func TestConnectionCloseAndHTTP2(t *testing.T) {
	s, b, _ := startServer(t, Config{})

	c1 := client(b, false)
	for range 5 {
		resp, _ := get(t, c1, http.MethodGet, s.URL(), true)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if got := s.Connections(); got != 5 {
		t.Fatalf("after 5 Connection: close requests, Connections() = %d, want 5", got)
	}

	c2 := client(b, true)
	defer c2.CloseIdleConnections()
	for range 10 {
		resp, body := get(t, c2, http.MethodGet, s.URL(), false)
		if resp.Proto != "HTTP/2.0" {
			t.Fatalf("proto %s, want HTTP/2.0", resp.Proto)
		}
		if len(body) != DefaultBodySize {
			t.Fatalf("h2 body %d bytes", len(body))
		}
	}
	if got, want := s.Requests(), int64(15); got != want {
		t.Errorf("Requests() = %d, want %d", got, want)
	}
	if got := s.Connections(); got != 6 {
		t.Errorf("Connections() = %d, want 6 (5 closed + 1 multiplexed h2)", got)
	}
}

func TestCustomBodyAndHEAD(t *testing.T) {
	body := []byte("hello")
	s, b, _ := startServer(t, Config{Body: body, Addr: "127.0.0.1:0"})
	body[0] = 'J' // New must have copied it
	c := client(b, false)
	defer c.CloseIdleConnections()

	resp, got := get(t, c, http.MethodPost, s.URL()+"x?y=1", false)
	if string(got) != "hello" || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: status %d body %q, want 200 %q", resp.StatusCode, got, "hello")
	}
	resp, got = get(t, c, http.MethodHead, s.URL(), false)
	if len(got) != 0 || resp.ContentLength != 5 {
		t.Fatalf("HEAD: body %q ContentLength %d, want empty body and 5", got, resp.ContentLength)
	}
	if s.Requests() != 2 {
		t.Errorf("Requests() = %d, want 2", s.Requests())
	}
}

func TestURLAndAddr(t *testing.T) {
	s, _, _ := startServer(t, Config{})
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q (%v), want 127.0.0.1 with a real port", s.Addr(), err)
	}
	if want := "https://127.0.0.1:" + port + "/"; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
}

func TestNewErrorsAndRunOnce(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a certificate succeeded")
	}
	b, err := tlsgen.New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Cert: b.Cert, Addr: "127.0.0.1:notaport"}); err == nil {
		t.Error("New with a bad address succeeded")
	}

	s, err := New(Config{Cert: b.Cert})
	if err != nil {
		t.Fatal(err)
	}
	// Occupying the port: a second server on the same address must fail.
	if _, err := New(Config{Cert: b.Cert, Addr: s.Addr()}); err == nil {
		t.Error("New on an address already in use succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after Run: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// Close without Run releases the port.
	s2, err := New(Config{Cert: b.Cert})
	if err != nil {
		t.Fatal(err)
	}
	addr := s2.Addr()
	if err := s2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not released by Close: %v", err)
	}
	_ = ln.Close()
}

func TestHandshakeFailureIsCountedButNotARequest(t *testing.T) {
	s, _, _ := startServer(t, Config{})
	other, err := tlsgen.New()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", s.Addr(), other.ClientConfig())
	if err == nil {
		_ = conn.Close()
		t.Fatal("handshake trusting another CA succeeded")
	}
	// The accept (and its StateNew hook) happens before the handshake the
	// client just failed, so the count is already visible.
	if got := s.Connections(); got != 1 {
		t.Errorf("Connections() = %d, want 1", got)
	}
	if got := s.Requests(); got != 0 {
		t.Errorf("Requests() = %d, want 0", got)
	}
}

// TestHTTP3SamePort: with Config.HTTP3 the server answers HTTP/3 on the UDP
// port of its TCP port's number, with the same body, and counts those
// requests and QUIC connections with the TCP ones.
func TestHTTP3SamePort(t *testing.T) {
	s, b, stop := startServer(t, Config{HTTP3: true})
	if !s.HTTP3() {
		t.Fatal("HTTP3() = false with Config.HTTP3")
	}
	h3 := &http3.Transport{TLSClientConfig: b.ClientConfig()}
	defer h3.Close()
	h3c := &http.Client{Transport: h3, Timeout: 10 * time.Second}
	for i := 0; i < 3; i++ {
		resp, err := h3c.Get(s.URL())
		if err != nil {
			t.Fatalf("HTTP/3 GET %s: %v", s.URL(), err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.ProtoMajor != 3 || resp.StatusCode != 200 || !bytes.Equal(body, DefaultBody()) {
			t.Fatalf("HTTP/3 response: proto %s, status %d, %d body bytes; want HTTP/3 200 and %d bytes", resp.Proto, resp.StatusCode, len(body), DefaultBodySize)
		}
	}
	tcp := &http.Client{Transport: &http.Transport{TLSClientConfig: b.ClientConfig()}, Timeout: 10 * time.Second}
	resp, err := tcp.Get(s.URL())
	if err != nil {
		t.Fatalf("HTTPS GET over TCP: %v", err)
	}
	_ = resp.Body.Close()
	tcp.CloseIdleConnections()
	if got := s.Requests(); got != 4 {
		t.Errorf("Requests() = %d, want 4 (3 over HTTP/3, 1 over TCP)", got)
	}
	if got := s.QUICConnections(); got != 1 {
		t.Errorf("QUICConnections() = %d, want 1 (3 requests on one QUIC connection)", got)
	}
	if got := s.Connections(); got != 1 {
		t.Errorf("Connections() = %d, want 1 TCP connection", got)
	}
	_ = h3.Close()
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestHTTP3PortTaken: New fails, naming UDP and HTTP/3, when the UDP port
// is held by another socket, and releases the TCP port it bound.
func TestHTTP3PortTaken(t *testing.T) {
	b, err := tlsgen.New()
	if err != nil {
		t.Fatal(err)
	}
	// Find a port free on TCP whose UDP twin we then hold.
	probe, err := New(Config{Cert: b.Cert})
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr()
	_ = probe.Close()
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	held, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		t.Fatalf("hold UDP %s: %v", addr, err)
	}
	defer held.Close()
	_, err = New(Config{Cert: b.Cert, Addr: addr, HTTP3: true})
	if err == nil || !strings.Contains(err.Error(), "UDP") || !strings.Contains(err.Error(), "HTTP/3") {
		t.Fatalf("New with UDP %s taken: err = %v, want one naming UDP and HTTP/3", addr, err)
	}
	again, err := New(Config{Cert: b.Cert, Addr: addr})
	if err != nil {
		t.Fatalf("TCP %s not released after the HTTP/3 failure: %v", addr, err)
	}
	_ = again.Close()
}

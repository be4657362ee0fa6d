package target

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Defaults applied by New to zero Config fields, and server limits.
const (
	// DefaultAddr is the listen address used when Config.Addr is empty:
	// loopback, kernel-chosen port.
	DefaultAddr = "127.0.0.1:0"
	// DefaultBodySize is the length in bytes of DefaultBody.
	DefaultBodySize = 600
	// ShutdownTimeout bounds the graceful shutdown Run performs when its
	// context ends; connections still busy after it are closed forcibly.
	ShutdownTimeout = 2 * time.Second
	// ReadHeaderTimeout is how long a connection may take to send request
	// headers.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout is how long an idle keep-alive connection is kept open.
	IdleTimeout = 120 * time.Second
)

// DefaultBody returns a fresh copy of the default response body: a small,
// well-formed HTML page of exactly DefaultBodySize bytes.
func DefaultBody() []byte {
	const head = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Phalanx target</title></head>\n<body><h1>Phalanx target</h1>\n<p>"
	const tail = "</p>\n</body></html>\n"
	fill := DefaultBodySize - len(head) - len(tail)
	return []byte(head + strings.Repeat("x", fill) + tail)
}

// Config configures a Server. Only Cert is required.
type Config struct {
	// Addr is the TCP address to listen on, host:port. Empty means
	// DefaultAddr ("127.0.0.1:0").
	Addr string
	// Cert is the server certificate (for example tlsgen.Bundle.Cert).
	// Required: New fails if it holds no certificate.
	Cert tls.Certificate
	// Body is the response body sent to every request. Nil or empty means
	// DefaultBody(). The slice is copied by New.
	Body []byte
	// ErrorLog receives net/http's connection-level errors (TLS handshake
	// failures, for example). Nil discards them, which keeps load-test
	// output quiet.
	ErrorLog *log.Logger
	// Workers and ServiceTime make the server a modelled one (Model): at
	// most Workers requests are served at once, each for ServiceTime, the
	// rest queue in arrival order, so its capacity is Workers/ServiceTime
	// requests per second. Both zero (the default) answer at once; one
	// without the other is an error.
	Workers     int
	ServiceTime time.Duration
	// HTTP3 also serves HTTP/3 (RFC 9114, quic-go's http3.Server) on the
	// UDP port of the same number as the TCP one, with the same handler,
	// certificate and counts; 0-RTT is allowed (quic.Config.Allow0RTT).
	// False (the default) serves HTTP/1.1 and HTTP/2 over TCP only.
	HTTP3 bool
}

// Server is a running-or-ready HTTPS target. Create it with New, serve with
// Run. Its methods are safe for concurrent use.
type Server struct {
	ln  net.Listener // raw TCP listener; TLS is layered by http.Server
	srv *http.Server
	// udp and h3 serve HTTP/3 when Config.HTTP3 is set; both nil otherwise.
	udp  *net.UDPConn
	h3   *http3.Server
	body []byte
	// model is nil unless Config.Workers and ServiceTime are set.
	model *Model

	requests    atomic.Int64
	connections atomic.Int64
	quicConns   atomic.Int64

	runOnce   sync.Once
	closeOnce sync.Once
	closeErr  error
}

// New validates cfg, binds the TCP listener and returns a Server ready to
// Run. The port is bound when New returns, so Addr and URL are valid
// immediately. TLS 1.2 is the minimum version; ALPN offers h2 and
// http/1.1. Errors: a missing certificate, or a listen failure (wrapped).
// Call Close if the Server is never Run.
func New(cfg Config) (*Server, error) {
	if len(cfg.Cert.Certificate) == 0 || cfg.Cert.PrivateKey == nil {
		return nil, errors.New("target: config has no certificate")
	}
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	body := DefaultBody()
	if len(cfg.Body) > 0 {
		body = append([]byte(nil), cfg.Body...)
	}
	errLog := cfg.ErrorLog
	if errLog == nil {
		errLog = log.New(io.Discard, "", 0)
	}

	var model *Model
	if cfg.Workers != 0 || cfg.ServiceTime != 0 {
		m, err := NewModel(cfg.Workers, cfg.ServiceTime)
		if err != nil {
			return nil, err
		}
		model = m
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("target: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, body: body, model: model}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(s.serveHTTP),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cfg.Cert},
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          errLog,
		ConnState: func(_ net.Conn, st http.ConnState) {
			// StateNew is reported synchronously in the accept loop, before
			// the connection's first request is read.
			if st == http.StateNew {
				s.connections.Add(1)
			}
		},
	}
	if cfg.HTTP3 {
		if err := s.listenHTTP3(s.srv.TLSConfig); err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	return s, nil
}

// listenHTTP3 binds the UDP port of the TCP listener's number on its host
// and prepares the HTTP/3 server on it.
func (s *Server) listenHTTP3(tlsConf *tls.Config) error {
	tcp := s.ln.Addr().(*net.TCPAddr)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: tcp.IP, Port: tcp.Port, Zone: tcp.Zone})
	if err != nil {
		return fmt.Errorf("target: listen on UDP %s for HTTP/3: %w", s.ln.Addr(), err)
	}
	s.udp = udp
	s.h3 = &http3.Server{
		Handler:     http.HandlerFunc(s.serveHTTP),
		TLSConfig:   http3.ConfigureTLSConfig(tlsConf.Clone()),
		QUICConfig:  &quic.Config{Allow0RTT: true},
		IdleTimeout: IdleTimeout,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			s.quicConns.Add(1)
			return ctx
		},
	}
	return nil
}

// serveHTTP answers every request with 200 and the fixed body, after its
// service in the model when there is one. The count is
// incremented before the response is written, so a client that has read a
// response always observes it in Requests.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.model != nil && s.model.Serve(r.Context()) != nil {
		return // the client went away while it queued
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(s.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(s.body)
	}
}

// Run serves HTTPS on the listener bound by New until ctx ends, then shuts
// down gracefully: it stops accepting, lets in-flight requests finish for at
// most ShutdownTimeout, and force-closes what remains. It returns nil after
// a clean shutdown, an error wrapping context.DeadlineExceeded if the
// graceful period ran out, or the serve error if serving stopped for any
// other reason (including Close being called). Run may be called only once;
// later calls return an error immediately.
func (s *Server) Run(ctx context.Context) error {
	first := false
	s.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("target: run called more than once")
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.srv.ServeTLS(s.ln, "", "") }()
	var h3Err chan error // nil, never ready, without HTTP/3
	waits := []chan error{serveErr}
	if s.h3 != nil {
		h3Err = make(chan error, 1)
		waits = append(waits, h3Err)
		go func() { h3Err <- s.h3.Serve(s.udp) }()
	}

	var early error
	select {
	case early = <-serveErr:
	case early = <-h3Err:
	case <-ctx.Done():
	}
	if early != nil {
		_ = s.Close()
		return fmt.Errorf("target: serve: %w", early)
	}

	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	shutErr := s.srv.Shutdown(sctx)
	if s.h3 != nil {
		if err := s.h3.Shutdown(sctx); err != nil && shutErr == nil {
			shutErr = err
		}
	}
	if shutErr != nil {
		_ = s.Close()
	}
	if s.udp != nil {
		_ = s.udp.Close()
	}
	for _, ch := range waits {
		if err := <-ch; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("target: serve: %w", err)
		}
	}
	if shutErr != nil {
		return fmt.Errorf("target: shutdown: %w", shutErr)
	}
	return nil
}

// Close immediately closes the listener and all connections. It is meant
// for a Server that was never Run, or to abort one; a running Run then
// returns an error wrapping http.ErrServerClosed. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.srv.Close()
		if s.h3 != nil {
			if herr := s.h3.Close(); herr != nil && err == nil {
				err = herr
			}
			if uerr := s.udp.Close(); uerr != nil && !errors.Is(uerr, net.ErrClosed) && err == nil {
				err = uerr
			}
		}
		if lerr := s.ln.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
			err = lerr
		}
		if err != nil {
			s.closeErr = fmt.Errorf("target: close: %w", err)
		}
	})
	return s.closeErr
}

// Addr returns the host:port actually bound, e.g. "127.0.0.1:43117".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the base URL of the server with a trailing slash, e.g.
// "https://127.0.0.1:43117/". An unspecified bind address (0.0.0.0 or ::)
// is reported as 127.0.0.1.
func (s *Server) URL() string {
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		return "https://" + s.Addr() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, port) + "/"
}

// Requests returns the number of HTTP requests received so far (all
// methods and paths, HTTP/1.1, HTTP/2 and HTTP/3 alike).
func (s *Server) Requests() int64 { return s.requests.Load() }

// Model returns the server's model, nil unless Config.Workers and
// ServiceTime were set.
func (s *Server) Model() *Model { return s.model }

// Connections returns the number of TCP connections accepted so far, each
// of which is then served over TLS. A connection whose TLS handshake fails
// is still counted. QUIC connections are counted by QUICConnections.
func (s *Server) Connections() int64 { return s.connections.Load() }

// QUICConnections returns the number of QUIC connections whose HTTP/3
// serving began (handshake done, or 0-RTT accepted), 0 without
// Config.HTTP3.
func (s *Server) QUICConnections() int64 { return s.quicConns.Load() }

// HTTP3 reports whether the server also serves HTTP/3 on UDP (Config.HTTP3).
func (s *Server) HTTP3() bool { return s.h3 != nil }

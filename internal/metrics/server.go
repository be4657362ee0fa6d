package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phalanxload/phalanx/internal/security"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Server serves a registry's metrics on Path over HTTP (promhttp: the
// text format, or protobuf with native histograms for a scraper that asks
// for it), with the daemon's mutual TLS when it has it
// (security.Config.MetricsTLS).
type Server struct {
	lis     net.Listener
	srv     *http.Server
	log     *slog.Logger
	tls     bool
	warning string
}

// Listen checks addr against the safe default
// (security.Config.CheckMetrics), then binds it; it serves nothing until
// Run. Errors: the check's, or the bind's, naming --metrics-addr.
func Listen(addr string, g prometheus.Gatherer, sec security.Config, log *slog.Logger) (*Server, error) {
	warning, err := sec.CheckMetrics(addr)
	if err != nil {
		return nil, err
	}
	tc, err := sec.MetricsTLS()
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", security.FlagMetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}}))
	s := &Server{lis: lis, log: log, tls: tc != nil, warning: warning,
		srv: &http.Server{Handler: mux, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	if tc != nil {
		s.lis = tls.NewListener(lis, tc)
	}
	return s, nil
}

// Addr returns the bound address; "" for a nil *Server (no metrics).
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// TLS reports whether the server serves HTTPS with mutual TLS.
func (s *Server) TLS() bool { return s.tls }

// Run serves until ctx ends, then shuts the server down (waiting at most
// a second for scrapes in progress).
func (s *Server) Run(ctx context.Context) error {
	if s.warning != "" {
		s.log.Warn(s.warning)
	}
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(s.lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve %s: %w", Path, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", Path, err)
	}
	return nil
}

// slogPrinter is promhttp's error log on a slog.Logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }

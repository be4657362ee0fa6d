// Package targettest starts the built-in HTTPS target for tests in other
// packages: one call instead of the CA, server, goroutine and cleanup each
// test wrote again.
package targettest

import (
	"context"
	"testing"

	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// Start starts the built-in target on a loopback port with a certificate
// from a throwaway CA (tlsgen.New), and returns the server and the CA
// bundle (its CAPEM verifies the target; its WriteFiles gives PEM files).
// The target stops and its goroutine is joined when the test ends
// (t.Cleanup); an error from its Run fails the test. A setup error is
// fatal.
func Start(t testing.TB) (*target.Server, *tlsgen.Bundle) {
	t.Helper()
	return StartConfig(t, target.Config{})
}

// StartConfig is Start with cfg (its Cert is replaced by the throwaway
// CA's), for a modelled server (cfg.Workers, cfg.ServiceTime).
func StartConfig(t testing.TB, cfg target.Config) (*target.Server, *tlsgen.Bundle) {
	t.Helper()
	b, err := tlsgen.New()
	if err != nil {
		t.Fatalf("targettest: CA: %v", err)
	}
	cfg.Cert = b.Cert
	srv, err := target.New(cfg)
	if err != nil {
		t.Fatalf("targettest: target: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("targettest: target: %v", err)
		}
	})
	return srv, b
}

package security

import (
	"context"
	"net"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestInsecureHop serves and dials with the zero Config: a call goes
// through.
func TestInsecureHop(t *testing.T) {
	var cfg Config
	so, err := cfg.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	do, err := cfg.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(so)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	conn, err := grpc.NewClient(lis.Addr().String(), do)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health status %v, want SERVING", resp.GetStatus())
	}
}

func TestUnknownMode(t *testing.T) {
	cfg := Config{Mode: Mode(7)}
	if _, err := cfg.ServerOption(); err == nil {
		t.Error("ServerOption: want an error for an unknown mode")
	}
	if _, err := cfg.DialOption(); err == nil {
		t.Error("DialOption: want an error for an unknown mode")
	}
	if got := cfg.Mode.String(); got != "Mode(7)" {
		t.Errorf("String() = %q", got)
	}
}

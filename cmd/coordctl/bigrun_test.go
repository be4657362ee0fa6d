package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/store"
)

// TestReportLargeRunFromCoordinator: a stored run whose report message is
// larger than gRPC's default 4 MiB receive limit (a long run's timeline:
// here 3,000 one-second intervals of dayRun) is reported by coordctl over
// the coordinator's CoordinatorService, not refused as
// ResourceExhausted.
func TestReportLargeRunFromCoordinator(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := dayRun(t, 3000)
	if n := proto.Size(run.GetResult()); n <= 4<<20 {
		t.Fatalf("the run's result is %d bytes: want more than gRPC's default 4 MiB limit", n)
	}
	if err := st.Import(run); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	co, err := coordinator.New(coordinator.Config{Name: "coordinator-big", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	}()
	code, out, errOut := runCLI("--coordinator", co.GRPCAddr(), "report", run.GetRunId())
	if code != 0 || !strings.Contains(out, "Requests/sec:") {
		t.Fatalf("coordctl report of a %d-interval run: exit %d\n%s%s", len(run.GetIntervals()), code, out, errOut)
	}
}

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/store"
)

// TestReportLargeRunFromCoordinator: a stored run whose report message is
// larger than gRPC's default 4 MiB receive limit (a long run's timeline:
// here 3,000 one-second intervals of dayRun) is reported by coordctl over
// the coordinator's CoordinatorService, and its .phx exported, removed and
// imported again, not refused as ResourceExhausted.
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
	// Exported, removed and imported again through the same coordinator:
	// the import's request is as large.
	code, phx, errOut := runCLI("--coordinator", co.GRPCAddr(), "export", run.GetRunId())
	if code != 0 || len(phx) <= 4<<20 {
		t.Fatalf("coordctl export: exit %d, %d bytes: want the whole run\n%s", code, len(phx), errOut)
	}
	file := filepath.Join(t.TempDir(), "big.phx")
	if err := os.WriteFile(file, []byte(phx), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut = runCLI("--coordinator", co.GRPCAddr(), "rm", run.GetRunId()); code != 0 {
		t.Fatalf("coordctl rm: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runCLI("--coordinator", co.GRPCAddr(), "import", file); code != 0 {
		t.Fatalf("coordctl import of a %d-byte .phx: exit %d\n%s%s", len(phx), code, out, errOut)
	}
	if code, out, errOut = runCLI("--coordinator", co.GRPCAddr(), "report", run.GetRunId()); code != 0 || !strings.Contains(out, "Requests/sec:") {
		t.Fatalf("coordctl report after the import: exit %d\n%s%s", code, out, errOut)
	}
}

package localcluster

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: Close
// joins every member. memberlist's probe of a member may still sleep out
// its timeout after Shutdown (it ends on its own), so it is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

func TestStartAndClose(t *testing.T) {
	c, err := Start(context.Background(), 2, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Agents) != 2 || len(c.Coordinator.Agents()) != 2 {
		t.Errorf("%d agents started, coordinator sees %d; want 2 and 2", len(c.Agents), len(c.Coordinator.Agents()))
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

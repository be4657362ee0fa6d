package agent_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

// TestAgentLogsLeave: an agent's shutdown logs its leave of the cluster
// (alone in it, the leave is confirmed at once), after its start line.
func TestAgentLogsLeave(t *testing.T) {
	logs := &securitytest.Log{}
	a, err := agent.New(agent.Config{Name: "leave-agent", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", CPUs: 1,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.Lines(`msg="agent started"`)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if lines := logs.Lines(`msg="left the cluster"`); len(lines) != 1 {
		t.Errorf("leave lines after the shutdown: %q; logged:\n%s", lines, logs.String())
	}
}

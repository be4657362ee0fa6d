package localcluster

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/internal/cluster"
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

// TestGossipKeys: a cluster started with gossip keys forms from its key
// files; an agent with no key file, joining the coordinator, is never one
// of its agents.
func TestGossipKeys(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	c, err := StartWith(context.Background(), Options{Agents: 2, CPUsPerAgent: 1, Logger: log, GossipKeys: [][]byte{[]byte(strings.Repeat("k", cluster.KeySize))}, KeyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if _, err := cluster.ReadKeyFile(KeyFile(dir, "agent-1")); err != nil {
		t.Fatalf("agent-1's key file: %v", err)
	}
	rogue, err := agent.New(agent.Config{Name: "rogue", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Join: []string{c.Coordinator.GossipAddr()}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rogue.Run(ctx) }()
	// The rogue retries its join each second; gossip would list it within
	// a probe interval of a successful one.
	time.Sleep(2500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("rogue agent: %v", err)
	}
	var got []string
	for _, m := range c.Coordinator.Agents() {
		got = append(got, m.GetName())
	}
	if !slices.Equal(got, []string{"agent-1", "agent-2"}) {
		t.Errorf("coordinator sees agents %v, want [agent-1 agent-2]", got)
	}
}

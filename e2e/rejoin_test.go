package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// runMember runs a coordinator or an agent until the returned stop is
// called (or the test ends); stop waits for it and fails the test on error.
func runMember(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("member stopped with %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func startCoordinator(t *testing.T, gossipAddr string) (*coordinator.Coordinator, func()) {
	t.Helper()
	c, err := coordinator.New(coordinator.Config{
		Name: "coordinator", GRPCAddr: "127.0.0.1:0", GossipAddr: gossipAddr, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, runMember(t, c.Run)
}

// waitIdleAgent waits up to timeout for c to list an idle agent named name
// and returns how long that took.
func waitIdleAgent(t *testing.T, c *coordinator.Coordinator, name string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		for _, m := range c.Agents() {
			if m.GetName() == name && m.GetState() == pb.AgentState_AGENT_STATE_IDLE {
				return time.Since(start)
			}
		}
		if time.Since(start) > timeout {
			t.Fatalf("coordinator lists agents %v after %v, want idle %s", c.Agents(), timeout, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgentRejoinsRestartedCoordinator stops the coordinator and starts a
// new one on the same gossip address, as a restarted coordinator process
// would: the agent, which joined the first, must rejoin the second on its
// own (it is not restarted), and the new coordinator must run a plan on it.
func TestAgentRejoinsRestartedCoordinator(t *testing.T) {
	srv, ca := startTarget(t)
	coord1, stopCoord1 := startCoordinator(t, "127.0.0.1:0")
	gossip := coord1.GossipAddr()
	a, err := agent.New(agent.Config{
		Name: "agent-1", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		Join: []string{gossip}, CPUs: 1, RejoinInterval: 200 * time.Millisecond, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, a.Run)
	waitIdleAgent(t, coord1, "agent-1", 10*time.Second)

	stopCoord1()
	coord2, _ := startCoordinator(t, gossip)
	took := waitIdleAgent(t, coord2, "agent-1", 10*time.Second)
	t.Logf("restarted coordinator lists the agent after %v", took.Round(time.Millisecond))

	p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: time.Second, TLS: plan.TLS{CAPEM: ca.CAPEM}}
	res, err := coord2.RunPlan(context.Background(), p, nil)
	if err != nil {
		t.Fatalf("run on the restarted coordinator: %v", err)
	}
	if len(res.GetAgents()) != 1 {
		t.Fatalf("run result has %d agents, want 1", len(res.GetAgents()))
	}
}

package agent_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// TestMain fails the package when a goroutine outlives its tests: the
// share's stream watcher, the gRPC server and the gossip goroutines are all
// joined by the agent's Run. memberlist's probe of a member may still sleep
// out its timeout after Shutdown (it ends on its own), so it is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

func TestDefaultConfig(t *testing.T) {
	c := agent.DefaultConfig()
	if c.GRPCAddr != "127.0.0.1:7070" || c.GossipAddr != "0.0.0.0:7946" || !c.LAN ||
		c.RejoinInterval != cluster.DefaultRejoinInterval || c.CPUs != runtime.GOMAXPROCS(0) || c.Logger == nil {
		t.Errorf("DefaultConfig() = %+v", c)
	}
	if c.Name != "" || c.AdvertiseAddr != "" || c.Clock != nil || len(c.Join) != 0 {
		t.Errorf("DefaultConfig() sets a field New derives: %+v", c)
	}
}

// TestShareEndsWithRun runs a share on one agent, then stops the cluster:
// Run returns without error and leaves no goroutine behind (TestMain).
func TestShareEndsWithRun(t *testing.T) {
	srv, b := targettest.Start(t)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := localcluster.Start(context.Background(), 1, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	if len(res.GetAgents()) != 1 {
		t.Errorf("result has %d agent rows, want 1", len(res.GetAgents()))
	}
	if srv.Requests() == 0 {
		t.Error("the target saw no request")
	}
	if err := c.Close(); err != nil {
		t.Errorf("cluster close: %v", err)
	}
}

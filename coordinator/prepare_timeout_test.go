package coordinator

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestPrepareBudget: the preparation's deadline grows with the run, from
// PrepareTimeout, by 5 ms per agent and 1 ms per connection of the largest
// share.
func TestPrepareBudget(t *testing.T) {
	for _, tc := range []struct {
		agents, connections int
		want                time.Duration
	}{
		{1, 1, 30*time.Second + 6*time.Millisecond},
		{100, 10000, 30*time.Second + 500*time.Millisecond + 100*time.Millisecond},
		{10000, 10000, 80*time.Second + time.Millisecond},
		{1, 100000, 130*time.Second + 5*time.Millisecond},
		{3, 10, 30*time.Second + 15*time.Millisecond + 4*time.Millisecond}, // shares 4, 3, 3
	} {
		rn := &run{c: &Coordinator{cfg: DefaultConfig()}}
		for i := range tc.agents {
			rn.agents = append(rn.agents, &agentRun{share: plan.Share{Connections: plan.Part(tc.connections, tc.agents, i)}})
		}
		if got := rn.prepareBudget(); got != tc.want {
			t.Errorf("%d agents, %d connections: budget %v, want %v", tc.agents, tc.connections, got, tc.want)
		}
	}
}

// TestPrepareTimeout: an agent whose gRPC port accepts the connection and
// never answers fails the preparation with DeadlineExceeded, no earlier
// than the budget (PrepareTimeout 200 ms + 5 ms for the agent + 100 ms
// for its 100 connections), and the error names the budget and its rule.
func TestPrepareTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	held.Go(func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // held open, never read
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		lis.Close()
		held.Wait()
		for _, conn := range conns {
			conn.Close()
		}
	})
	c, ctx := runningCoordinator(t, "prepare-timeout", 200*time.Millisecond)
	p := plan.Plan{URL: "http://127.0.0.1:1/", Connections: 100, Duration: time.Second, Interval: time.Second}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	rn := c.newRun(ctx, p, []*pb.NodeMeta{{Role: pb.Role_ROLE_AGENT, Name: "silent", GrpcAddr: lis.Addr().String(), Cpus: 1}})
	defer c.unregister(rn.id)
	defer rn.close()
	t0 := time.Now()
	err = rn.prepare()
	took := time.Since(t0)
	const budget = 305 * time.Millisecond
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded ||
		!strings.Contains(st.Message(), "agents not ready within 305ms (--prepare-timeout 200ms + 5ms per agent + 1ms per connection of the largest share)") ||
		!strings.Contains(st.Message(), "silent") {
		t.Fatalf("prepare: %v, want DeadlineExceeded naming the 305ms budget, its rule and the agent", err)
	}
	if took < budget {
		t.Errorf("prepare gave up after %v, before its budget %v", took, budget)
	}
}

package coordinator_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestDeadAgentStillGossiped: a member that gossip lists as an idle agent
// but whose gRPC port refuses connections (an agent killed a moment ago)
// fails the run with FailedPrecondition (not Unavailable: coordctl takes
// that for its coordinator being gone), naming the agent, its address and
// the cause, and the coordinator logs it as a WARN.
func TestDeadAgentStillGossiped(t *testing.T) {
	srv, b := targettest.Start(t)
	logs := &securitytest.Log{}
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there any more: connection refused
	meta := &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: "ghost", GrpcAddr: dead, Cpus: 1, State: pb.AgentState_AGENT_STATE_IDLE}
	cl, err := cluster.New(cluster.Config{Name: "ghost", BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return meta },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Leave(time.Second) })
	if _, err := cl.Join(context.Background(), []string{c.Coordinator.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(c.Coordinator.Agents()) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the coordinator does not list the ghost agent")
		}
	}
	_, err = c.Coordinator.RunPlan(context.Background(), plan.Plan{URL: srv.URL(), Connections: 1, Requests: 1, TLS: plan.TLS{CAPEM: b.CAPEM}}, nil)
	st := status.Convert(err)
	want := "agent ghost at " + dead + " unreachable"
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), want) ||
		!strings.Contains(st.Message(), "connection refused") || !strings.Contains(st.Message(), "gossip has not marked it dead yet") {
		t.Errorf("run on a dead agent: %v; want FailedPrecondition naming %q, the refused connection and the hint", err, want)
	}
	if got := logs.Lines("level=WARN", "agent unreachable", "agent=ghost", "grpc="+dead, "connection refused"); len(got) != 1 {
		t.Errorf("%d WARN lines about the dead agent, want 1:\n%s", len(got), logs.String())
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
}

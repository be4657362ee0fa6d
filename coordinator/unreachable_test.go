package coordinator_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// gossipAgent joins the cluster at join as an idle agent named name whose
// gRPC address is grpcAddr and which gossips no gRPC security (as an older
// agent would), until the test ends.
func gossipAgent(t *testing.T, name, grpcAddr, join string) {
	t.Helper()
	meta := &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: name, GrpcAddr: grpcAddr, Cpus: 1, State: pb.AgentState_AGENT_STATE_IDLE}
	cl, err := cluster.New(cluster.Config{Name: name, BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return meta },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Leave(time.Second) })
	if _, err := cl.Join(context.Background(), []string{join}); err != nil {
		t.Fatal(err)
	}
}

// TestUnreachableAgent: a member that gossip lists as an idle agent but
// that the coordinator cannot reach fails the run with FailedPrecondition
// (not Unavailable: coordctl takes that for its coordinator being gone),
// naming the agent, its address, the cause and what to do, and the
// coordinator logs it as a WARN: an agent killed a moment ago (its port
// refuses connections), and a plaintext agent that gossips no security
// (an older agent) in a mutual-TLS cluster.
func TestUnreachableAgent(t *testing.T) {
	srv, b := targettest.Start(t)
	for _, tc := range []struct {
		name   string
		tls    bool
		listen bool // a plaintext gRPC server listens at the agent's address
		cause  string
		hint   string
	}{
		{"killed", false, false, "connection refused", "gossip has not marked it dead yet"},
		{"plaintext", true, true, "first record does not look like a TLS handshake", "it does not speak TLS: started without --tls-*?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &securitytest.Log{}
			o := localcluster.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}
			if tc.tls {
				o.CoordinatorSecurity = securitytest.New(t).Config(t, security.RoleCoordinator)
			}
			c, err := localcluster.StartWith(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := lis.Addr().String()
			if tc.listen {
				gs := grpc.NewServer()
				served := make(chan struct{})
				go func() { defer close(served); _ = gs.Serve(lis) }()
				t.Cleanup(func() { gs.Stop(); <-served })
			} else {
				lis.Close() // nothing listens there any more: connection refused
			}
			gossipAgent(t, "ghost", addr, c.Coordinator.GossipAddr())
			for deadline := time.Now().Add(10 * time.Second); len(c.Coordinator.Agents()) != 1; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the coordinator does not list the ghost agent")
				}
			}
			_, err = c.Coordinator.RunPlan(context.Background(), plan.Plan{URL: srv.URL(), Connections: 1, Requests: 1, TLS: plan.TLS{CAPEM: b.CAPEM}}, nil)
			st := status.Convert(err)
			want := "agent ghost at " + addr + " unreachable"
			if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), want) ||
				!strings.Contains(st.Message(), tc.cause) || !strings.Contains(st.Message(), tc.hint) {
				t.Errorf("run: %v; want FailedPrecondition naming %q, %q and the hint %q", err, want, tc.cause, tc.hint)
			}
			if got := logs.Lines("level=WARN", "agent unreachable", "agent=ghost", "grpc="+addr, tc.cause); len(got) != 1 {
				t.Errorf("%d WARN lines about the agent, want 1:\n%s", len(got), logs.String())
			}
		})
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
}

// TestTLSAgentPlaintextCoordinator: a plaintext coordinator does not use
// an agent that gossips mutual-TLS gRPC: it warns once when the agent
// joins, and a run fails before any dial with FailedPrecondition naming the
// agent and the flags the coordinator lacks.
func TestTLSAgentPlaintextCoordinator(t *testing.T) {
	srv, b := targettest.Start(t)
	logs := &securitytest.Log{}
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		AgentSecurity: securitytest.New(t).Config(t, security.RoleAgent),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for range 2 {
		_, err = c.Coordinator.RunPlan(context.Background(), plan.Plan{URL: srv.URL(), Connections: 1, Requests: 1, TLS: plan.TLS{CAPEM: b.CAPEM}}, nil)
		want := "no usable agents: agent agent-1 at " + c.Agents[0].GRPCAddr() +
			": its gRPC is mutual TLS while this coordinator's is plaintext: start the coordinator with --tls-ca, --tls-cert and --tls-key"
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != want {
			t.Errorf("run: %v; want FailedPrecondition %q", err, want)
		}
	}
	if got := logs.Lines("level=WARN", "agent not usable for runs: its gRPC is mutual TLS", "agent=agent-1"); len(got) != 1 {
		t.Errorf("%d join warnings about the agent, want 1 (state changes do not repeat it):\n%s", len(got), logs.String())
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
}

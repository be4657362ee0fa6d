package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// exposed judges every address a network one: the seam that lets a test on
// 127.0.0.1 stand for a daemon on a real interface.
func exposed(string) bool { return false }

// TestNetworkDaemonNeedsTLS: an agent or coordinator on a network address
// without mutual TLS does not start, and says how to fix it.
func TestNetworkDaemonNeedsTLS(t *testing.T) {
	sec := security.Config{Loopback: exposed}
	_, err := agent.New(agent.Config{GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Security: sec})
	if err == nil || !strings.Contains(err.Error(), "--grpc-addr 127.0.0.1:0 is not a loopback address") || !strings.Contains(err.Error(), "--insecure-cluster") {
		t.Errorf("agent.New on a network address without TLS: %v; want refused, naming --grpc-addr and --insecure-cluster", err)
	}
	_, err = coordinator.New(coordinator.Config{GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Security: sec})
	if err == nil || !strings.Contains(err.Error(), "is not a loopback address") || !strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("coordinator.New on a network address without TLS: %v; want refused, naming --tls-ca", err)
	}
	// The defaults gossip on 0.0.0.0: refused too, without any seam.
	if _, err := agent.New(agent.Config{GRPCAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "--gossip-addr 0.0.0.0:7946") {
		t.Errorf("agent.New with the default gossip address: %v; want refused", err)
	}
}

// TestInsecureClusterWarns: with --insecure-cluster the daemons on a
// network address start, run, and warn at start and at every run.
func TestInsecureClusterWarns(t *testing.T) {
	srv, b := targettest.Start(t)
	logs := &securitytest.Log{}
	sec := security.Config{InsecureCluster: true, Loopback: exposed}
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 1, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		CoordinatorSecurity: sec, AgentSecurity: sec,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := plan.Plan{URL: srv.URL(), Connections: 1, Duration: 200 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	for range 2 {
		if _, err := c.Coordinator.RunPlan(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	const warn = "insecure cluster (--insecure-cluster): --grpc-addr 127.0.0.1:"
	for _, who := range []string{"component=agent", "component=coordinator"} {
		all := logs.Lines("level=WARN", warn, who)
		runs := logs.Lines("level=WARN", warn, who, "run_id=")
		if len(all)-len(runs) != 1 || len(runs) != 2 {
			t.Errorf("%s: %d start warnings and %d run warnings, want 1 and 2:\n%s", who, len(all)-len(runs), len(runs), strings.Join(all, "\n"))
		}
	}
}

// TestTLSCluster runs a plan on a cluster whose hops are all mutual TLS,
// coordctl's dial verifies the server's role, and an agent refuses a
// client certificate with PermissionDenied, logging it.
func TestTLSCluster(t *testing.T) {
	srv, b := targettest.Start(t)
	pki := securitytest.New(t)
	logs := &securitytest.Log{}
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 2, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		CoordinatorSecurity: pki.Config(t, security.RoleCoordinator), AgentSecurity: pki.Config(t, security.RoleAgent),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := plan.Plan{URL: srv.URL(), Connections: 2, Requests: 200, TLS: plan.TLS{CAPEM: b.CAPEM}}
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var done int64
	for _, a := range res.GetAgents() {
		if a.GetError() != "" {
			t.Errorf("agent %s: %s", a.GetName(), a.GetError())
		}
		done += a.GetRequests()
	}
	if done != 200 || srv.Requests() != 200 {
		t.Errorf("agents completed %d requests, the target counted %d; want 200 and 200", done, srv.Requests())
	}
	if got := logs.Lines("grpc_tls=on", "agent started"); len(got) != 2 {
		t.Errorf("%d agents logged mutual TLS at start, want 2", len(got))
	}
	for _, m := range c.Coordinator.Agents() {
		if m.GetGrpcSecurity() != pb.GrpcSecurity_GRPC_SECURITY_MUTUAL_TLS {
			t.Errorf("agent %s gossips gRPC security %v, want mutual TLS", m.GetName(), m.GetGrpcSecurity())
		}
	}

	// coordctl dials only a coordinator's certificate; a rogue client with
	// coordctl's certificate that expects an agent's is refused by it.
	dial, err := pki.Config(t, security.RoleClient).DialOption()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.Agents[0].GRPCAddr(), dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pb.NewAgentServiceClient(conn).Clock(context.Background(), &pb.ClockRequest{})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "coordinator.phalanx") {
		t.Errorf("coordctl's dial to an agent: %v; want it to refuse the agent's certificate (not coordinator.phalanx)", err)
	}
	cert, key := pki.Issue(t, security.RoleClient, "ops")
	rogue, err := grpc.NewClient(c.Agents[0].GRPCAddr(), securitytest.Dial(t, cert, key, pki.Pool(), security.RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	_, err = pb.NewAgentServiceClient(rogue).Clock(context.Background(), &pb.ClockRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a client certificate calling an agent: %v, want PermissionDenied", err)
	}
	if got := logs.Lines("refused a gRPC call", "agent=agent-1", "peer=127.0.0.1:", "code=PermissionDenied", "has role client"); len(got) != 1 {
		t.Errorf("agent-1 logged %d refusals of the client certificate, want 1", len(got))
	}
}

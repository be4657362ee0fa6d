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

	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// rogueAgent is a cluster member that serves AgentService as an agent
// would up to the start, then sends one interval built by bad (none when
// bad returns nil: a silent agent) and waits for its stream to end.
type rogueAgent struct {
	pb.UnimplementedAgentServiceServer
	bad func(startAt time.Time, interval time.Duration) *pb.RunResponse

	streamEnd chan struct{} // closed when the coordinator ended the stream
}

func (r *rogueAgent) Clock(context.Context, *pb.ClockRequest) (*pb.ClockResponse, error) {
	return &pb.ClockResponse{NowUnixNano: time.Now().UnixNano()}, nil
}

func (r *rogueAgent) Run(stream pb.AgentService_RunServer) error {
	setup, err := stream.Recv()
	if err != nil {
		return err
	}
	p := setup.GetSetup().GetPlan()
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Accepted{Accepted: &pb.Accepted{}}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil { // Connect
		return err
	}
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Ready{Ready: &pb.Ready{Connections: setup.GetSetup().GetConnections()}}}); err != nil {
		return err
	}
	start, err := stream.Recv()
	if err != nil {
		return err
	}
	startAt := time.Unix(0, start.GetStart().GetStartAtUnixNano())
	if msg := r.bad(startAt, p.GetInterval().AsDuration()); msg != nil { // nil: silent
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	_, _ = stream.Recv() // returns when the coordinator closes its side
	close(r.streamEnd)
	return nil
}

// startOneAgent starts an in-process cluster of a coordinator and one
// agent (agent-1), closed when the test ends.
func startOneAgent(t *testing.T) *localcluster.Cluster {
	t.Helper()
	c, err := localcluster.Start(context.Background(), 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	return c
}

// startRogue starts a rogue agent named name that joins gossip at join.
func startRogue(t *testing.T, name, join string, bad func(time.Time, time.Duration) *pb.RunResponse) *rogueAgent {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rogueAgent{bad: bad, streamEnd: make(chan struct{})}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, r)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	meta := &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: name, GrpcAddr: lis.Addr().String(), Cpus: 1, State: pb.AgentState_AGENT_STATE_IDLE}
	cl, err := cluster.New(cluster.Config{Name: name, BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return meta },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Join(context.Background(), []string{join}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Leave(time.Second)
		srv.Stop()
		<-served
	})
	return r
}

// TestMalformedIntervalFailsTheShareNotTheCoordinator: an agent that sends
// a malformed interval (an index far outside the run's window, counters
// whose status codes do not add up, or a result whose window ends a year
// late) fails its share with an error naming it and the field; the
// coordinator closes that agent's stream (its load would stop), keeps the
// other agent's measurements whole, and then runs a good plan.
func TestMalformedIntervalFailsTheShareNotTheCoordinator(t *testing.T) {
	srv, b := targettest.Start(t)
	c := startOneAgent(t)
	for _, tc := range []struct {
		name string
		bad  func(startAt time.Time, interval time.Duration) *pb.RunResponse
		want string
	}{
		{"index", func(startAt time.Time, _ time.Duration) *pb.RunResponse {
			return &pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{Index: 1 << 30, StartUnixNano: startAt.UnixNano()}}}
		}, "sent a malformed interval: interval 1073741824: index outside the plan's window"},
		{"counters", func(startAt time.Time, interval time.Duration) *pb.RunResponse {
			return &pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{StartUnixNano: startAt.UnixNano(), EndUnixNano: startAt.Add(interval).UnixNano(),
				Counters: &pb.Counters{Requests: 5, Status: map[int32]int64{200: 1}}}}}
		}, "sent a malformed interval: interval 0: counters: 5 requests, but their status codes sum to 1"},
		{"first send", func(startAt time.Time, interval time.Duration) *pb.RunResponse {
			return &pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{StartUnixNano: startAt.UnixNano(), EndUnixNano: startAt.Add(interval).UnixNano(),
				FirstSendUnixNano: startAt.Add(365 * 24 * time.Hour).UnixNano()}}}
		}, "sent a malformed interval: interval 0: first send 8760h0m0s from the window's start"},
		{"window end", func(startAt time.Time, _ time.Duration) *pb.RunResponse {
			return &pb.RunResponse{Msg: &pb.RunResponse_Done{Done: &pb.Done{WindowEndUnixNano: startAt.Add(365 * 24 * time.Hour).UnixNano()}}}
		}, "sent a malformed result: done: window end 8760h0m0s from the window's start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The previous rogue has left: the coordinator no longer lists it.
			for deadline := time.Now().Add(10 * time.Second); len(c.Coordinator.Agents()) != 1; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("coordinator lists %d agents, want agent-1 alone", len(c.Coordinator.Agents()))
				}
			}
			rogue := startRogue(t, "zz-rogue-"+tc.name, c.Coordinator.GossipAddr(), tc.bad)
			if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			before := srv.Requests()
			// continue: the good agent runs its whole share (under the
			// default, abort, the rogue's loss would stop it at once).
			p := plan.Plan{URL: srv.URL(), Connections: 2, Duration: time.Second, TLS: plan.TLS{CAPEM: b.CAPEM}, OnAgentLoss: plan.ContinueOnLoss}
			res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
			if err != nil {
				t.Fatalf("RunPlan: %v", err)
			}
			rows := map[string]*pb.AgentResult{}
			for _, a := range res.GetAgents() {
				rows[a.GetName()] = a
			}
			rr := rows["zz-rogue-"+tc.name]
			if rr == nil || !strings.Contains(rr.GetError(), "agent zz-rogue-"+tc.name+" "+tc.want) {
				t.Errorf("rogue row %v, want its error to contain %q", rr, tc.want)
			}
			good := rows["agent-1"]
			if good == nil || good.GetError() != "" || good.GetRequests() == 0 || res.GetCounters().GetRequests() != good.GetRequests() {
				t.Errorf("agent-1 row %v; window requests %d: want agent-1's, whole", good, res.GetCounters().GetRequests())
			}
			if got := srv.Requests() - before; got != good.GetRequests()+good.GetInFlight() {
				t.Errorf("target saw %d requests; agent-1 reports %d + %d in flight", got, good.GetRequests(), good.GetInFlight())
			}
			select {
			case <-rogue.streamEnd:
			case <-time.After(5 * time.Second):
				t.Error("the coordinator did not end the rogue agent's stream")
			}
		})
	}
	p := plan.Plan{URL: srv.URL(), Connections: 1, Agents: 1, Duration: 300 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	if res, err := c.Coordinator.RunPlan(context.Background(), p, nil); err != nil || res.GetAgents()[0].GetError() != "" {
		t.Fatalf("a good plan after the malformed runs: %v, %v", res.GetAgents(), err)
	}
}

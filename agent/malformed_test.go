package agent_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	"github.com/phalanxload/phalanx/internal/version"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestMalformedSetupKeepsAgentServing sends a live agent malformed Run
// streams over gRPC, as a rogue or broken coordinator would: a share whose
// stage targets do not fit its plan (this crashed the agent), one with an
// index past its count, one with a bad plan, a first message that is not
// a setup, and a share followed by something other than Connect. Each ends
// with InvalidArgument naming the agent and the field; a share with a field
// this build does not know (a newer coordinator's) ends with
// FailedPrecondition naming the field and the agent's version. Nothing
// reaches the target, and the agent then runs a good plan from the
// coordinator.
func TestMalformedSetupKeepsAgentServing(t *testing.T) {
	srv, b := targettest.Start(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := localcluster.Start(context.Background(), 1, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	}()
	conn, err := grpc.NewClient(c.Agents[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewAgentServiceClient(conn)

	p := plan.Plan{URL: srv.URL(), Connections: 2, Stages: []plan.Stage{{Duration: time.Second, Connections: 4}, {Duration: time.Second}},
		TLS: plan.TLS{CAPEM: b.CAPEM}}
	p.SetDefaults()
	share := func(edit func(*pb.Share)) *pb.RunRequest {
		m := wire.ShareToProto(plan.Shares("20261202T000000Z-rogue1", p, 1)[0])
		edit(m)
		return &pb.RunRequest{Msg: &pb.RunRequest_Setup{Setup: m}}
	}
	newerField := func(m *pb.Share) { // a field of a newer coordinator's plan
		m.Plan.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	}
	for _, tc := range []struct {
		name string
		msgs []*pb.RunRequest
		want string
		code codes.Code
	}{
		{"short stage targets", []*pb.RunRequest{share(func(m *pb.Share) { m.StageTargets = m.StageTargets[:1] })},
			"agent agent-1: malformed share: share 0 of 1: stage_targets count 1: want 2", codes.InvalidArgument},
		{"index past count", []*pb.RunRequest{share(func(m *pb.Share) { m.Index = 7 })}, "share: index 7: want 0 to 0 (count 1)", codes.InvalidArgument},
		{"bad plan", []*pb.RunRequest{share(func(m *pb.Share) { m.Plan.Connections = -3 })}, "plan: connections = -3", codes.InvalidArgument},
		{"huge rate", []*pb.RunRequest{share(func(m *pb.Share) { m.Rate = 1 << 50 })}, "rate 1125899906842624: want 0", codes.InvalidArgument},
		{"no setup", []*pb.RunRequest{{Msg: &pb.RunRequest_Start{Start: &pb.Start{}}}}, "first message must be setup", codes.InvalidArgument},
		{"start before connect", []*pb.RunRequest{share(func(*pb.Share) {}), {Msg: &pb.RunRequest_Start{Start: &pb.Start{}}}},
			"agent agent-1: run stream: expected connect", codes.InvalidArgument},
		{"a newer coordinator's field", []*pb.RunRequest{share(newerField)},
			"agent agent-1 (phalanx " + version.Version + ") does not know the share's field(s) plan.999: the coordinator is newer", codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := client.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := stream.Send(m); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			for {
				_, err = stream.Recv() // an Accepted may come before the error
				if err != nil {
					break
				}
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want %v containing %q", err, tc.code, tc.want)
			}
			if n := srv.Connections(); n != 0 {
				t.Errorf("target accepted %d connections", n)
			}
		})
	}
	if err := c.WaitAgents(context.Background(), 1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	good := plan.Plan{URL: srv.URL(), Connections: 2, Duration: 300 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	res, err := c.Coordinator.RunPlan(context.Background(), good, nil)
	if err != nil || res.GetCounters().GetRequests() == 0 || res.GetAgents()[0].GetError() != "" {
		t.Fatalf("a good plan after the malformed ones: %v, %v", res.GetAgents(), err)
	}
}

// TestStartInstantBounded: a Start an hour away from the agent's clock
// (a broken or rogue coordinator) is refused with InvalidArgument rather
// than holding the agent, its connections open, for the hour.
func TestStartInstantBounded(t *testing.T) {
	srv, b := targettest.Start(t)
	c, err := localcluster.Start(context.Background(), 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	}()
	conn, err := grpc.NewClient(c.Agents[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := pb.NewAgentServiceClient(conn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Plan{URL: srv.URL(), Connections: 1, Duration: time.Second, TLS: plan.TLS{CAPEM: b.CAPEM}}
	p.SetDefaults()
	for _, m := range []*pb.RunRequest{
		{Msg: &pb.RunRequest_Setup{Setup: wire.ShareToProto(plan.Shares("20261202T000000Z-rogue2", p, 1)[0])}},
		{Msg: &pb.RunRequest_Connect{Connect: &pb.Connect{}}},
		{Msg: &pb.RunRequest_Start{Start: &pb.Start{StartAtUnixNano: time.Now().Add(time.Hour).UnixNano()}}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "from now (agent clock): want within 1m0s") || !strings.Contains(err.Error(), "agent agent-1: start instant 59m") {
		t.Fatalf("Run = %v, want InvalidArgument naming the start instant", err)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target saw %d requests, want 0", n)
	}
}

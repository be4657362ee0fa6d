package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/version"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestRunPlanRefusesUnknownFields: a RunPlan request holding a field this
// build does not know (a newer coordctl's plan setting, here in the open
// loop's settings) is refused with FailedPrecondition naming the field,
// the coordinator and its version, before any agent is asked; a request
// of this build's schema is not refused for it (it fails later, for want
// of agents: no agent is started here).
func TestRunPlanRefusesUnknownFields(t *testing.T) {
	c, _ := runningCoordinator(t, "coord-unknown", 5*time.Second)
	conn, err := grpc.NewClient(c.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewCoordinatorServiceClient(conn)
	run := func(req *pb.RunPlanRequest) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stream, err := client.RunPlan(ctx, req)
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	plan := func() *pb.Plan {
		return &pb.Plan{Url: "https://127.0.0.1:1/", Connections: 1, Duration: durationpb.New(time.Second),
			Load: &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{Rate: 10}}}
	}
	p := plan()
	p.GetOpenLoop().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	err = run(&pb.RunPlanRequest{Plan: p})
	want := "coordinator coord-unknown (phalanx " + version.Version + ") does not know the request's field(s) plan.open_loop.99: coordctl is newer"
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("RunPlan with an unknown field = %v, want FailedPrecondition containing %q", err, want)
	}
	if err := run(&pb.RunPlanRequest{Plan: plan()}); err == nil || strings.Contains(err.Error(), "does not know") {
		t.Fatalf("RunPlan of this build's schema, with no agent = %v, want the run's own refusal (no agents)", err)
	}
}

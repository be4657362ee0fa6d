package wire

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestUnknownFields: fields a newer schema set are found at any depth
// (the message itself, a nested message, an element of a repeated one),
// named by their path and number, after a real wire round trip; a
// message with none gives nil.
func TestUnknownFields(t *testing.T) {
	m := &pb.Share{Index: 1, Count: 2, Plan: &pb.Plan{Url: "https://x/", Headers: []*pb.Header{{Name: "a"}, {Name: "b"}},
		Load: &pb.Plan_OpenLoop{OpenLoop: &pb.OpenLoop{}}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var clean pb.Share
	if err := proto.Unmarshal(b, &clean); err != nil {
		t.Fatal(err)
	}
	if got := UnknownFields(&clean); got != nil {
		t.Fatalf("a share of this schema: %v", got)
	}
	field := func(num protowire.Number) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), 1)
	}
	m.ProtoReflect().SetUnknown(field(900))
	m.Plan.Headers[1].ProtoReflect().SetUnknown(append(field(901), field(902)...))
	m.Plan.GetOpenLoop().ProtoReflect().SetUnknown(field(903))
	if b, err = proto.Marshal(m); err != nil {
		t.Fatal(err)
	}
	var got pb.Share
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"900", "plan.headers[1].901", "plan.headers[1].902", "plan.open_loop.903"}
	if g := UnknownFields(&got); !slices.Equal(g, want) {
		t.Fatalf("UnknownFields = %q, want %q", g, want)
	}
}

package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// fuzzAgent is an Agent as far as decoding and preparing a share go: its
// configuration, and names resolving to loopback without DNS.
func fuzzAgent() *Agent {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &Agent{
		cfg: Config{Name: "fuzz-agent", CPUs: 2, Clock: time.Now, AllowTargets: allow.Default(), MaxConnections: 64, Logger: quiet},
		log: quiet,
		lookupHost: func(context.Context, string) ([]string, error) {
			return []string{"127.0.0.1"}, nil
		},
	}
}

// shareSeeds are valid shares in their wire form.
func shareSeeds() [][]byte {
	plans := []plan.Plan{
		{URL: "https://127.0.0.1:8443/", Connections: 4, Duration: time.Second},
		{URL: "http://localhost:8080/x?y=1", Connections: 3, Requests: 100, Load: plan.OpenLoop, Rate: 30, MaxConnections: 6},
		{URL: "https://127.0.0.1/", Connections: 2, Stages: []plan.Stage{{Duration: time.Second, Connections: 4}, {Duration: 2 * time.Second}}},
		{URL: "https://[::1]:8443/", Protocol: plan.H2, MaxStreams: 4, Connections: 2, Duration: time.Second, ConnectTo: "127.0.0.1:8443",
			Mix: []plan.Request{{Method: "GET", URL: "https://[::1]:8443/a", Weight: 2}, {Method: "POST", URL: "https://[::1]:8443/b", Body: []byte("x"), Weight: 1}}},
	}
	var out [][]byte
	for _, p := range plans {
		p.SetDefaults()
		for _, s := range plan.Shares("20261202T000000Z-abcdef", p, 2) {
			b, err := proto.Marshal(wire.ShareToProto(s))
			if err != nil {
				panic(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// FuzzSetup feeds the agent's decoding of a coordinator's Setup arbitrary
// bytes, as the Run stream's first message: decodeShare (the share's whole
// check) and newEngine (caps, the engine's validation, resolution and the
// allowlist), which is everything the agent does before it answers
// Accepted. It must never panic; it fails with a gRPC status error
// (InvalidArgument, FailedPrecondition for fields this build does not
// know, or PermissionDenied) or builds an engine for a share
// that passed every check, which is then closed unused.
func FuzzSetup(f *testing.F) {
	for _, b := range shareSeeds() {
		f.Add(b)
	}
	f.Add([]byte{})
	a := fuzzAgent()
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Share
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		share, err := a.decodeShare(&m)
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
				t.Fatalf("decodeShare: %v, want InvalidArgument or FailedPrecondition (unknown fields)", err)
			}
			return
		}
		eng, err := a.newEngine(context.Background(), share, a.log)
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.PermissionDenied {
				t.Fatalf("newEngine: %v, want InvalidArgument or PermissionDenied", err)
			}
			return
		}
		eng.Close()
	})
}

// TestSetupSeedsAccepted: the fuzz seeds are valid shares, so the fuzzer
// starts from shares that reach the engine (a seed the checks refuse would
// hide the engine from it).
func TestSetupSeedsAccepted(t *testing.T) {
	a := fuzzAgent()
	for i, b := range shareSeeds() {
		var m pb.Share
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		share, err := a.decodeShare(&m)
		if err != nil {
			t.Errorf("seed %d: %v", i, err)
			continue
		}
		eng, err := a.newEngine(context.Background(), share, a.log)
		if err != nil {
			t.Errorf("seed %d: %v", i, err)
			continue
		}
		eng.Close()
	}
}

package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	"github.com/phalanxload/phalanx/internal/tlsgen"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestMain fails the package when any goroutine outlives the tests: every
// cluster member and run must stop what it started. Except memberlist's
// probe of a member that just left: it waits out its probe interval (1 s)
// on its own after Shutdown, so a test that ends a cluster last would
// otherwise fail the package.
//
// With PHALANX_E2E_SPIN set, the test binary is spinOn's busy process
// instead, and runs no test.
func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) != "" {
		os.Exit(spinMain(os.Getenv(spinEnv)))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startTarget starts the built-in HTTPS target with a fresh test CA.
func startTarget(t *testing.T) (*target.Server, *tlsgen.Bundle) {
	t.Helper()
	return targettest.Start(t)
}

// startCluster starts a coordinator and n agents in this process.
func startCluster(t *testing.T, n int) *localcluster.Cluster {
	t.Helper()
	c, err := localcluster.Start(context.Background(), n, 1, quietLogger())
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

func TestInProcessClusterCountsMatchTarget(t *testing.T) {
	srv, ca := startTarget(t)
	c := startCluster(t, 2)

	p := plan.Plan{URL: srv.URL(), Connections: 8, Duration: 2 * time.Second, TLS: plan.TLS{CAPEM: ca.CAPEM}}
	var progress []*pb.Progress
	res, err := c.Coordinator.RunPlan(context.Background(), p, func(pr *pb.Progress) { progress = append(progress, pr) })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Requests+rep.InFlight, srv.Requests(); got != want {
		t.Errorf("report requests %d + in flight %d = %d, target counted %d", rep.Requests, rep.InFlight, got, want)
	}
	if rep.Issued != rep.Requests+rep.ErrorTotal()+rep.InFlight {
		t.Errorf("issued %d != requests %d + errors %d + in flight %d", rep.Issued, rep.Requests, rep.ErrorTotal(), rep.InFlight)
	}
	if rep.ErrorTotal() != 0 || rep.Status["200"] != rep.Requests {
		t.Errorf("errors %v, status %v, requests %d", rep.Errors, rep.Status, rep.Requests)
	}
	if len(rep.AgentRows) != 2 {
		t.Fatalf("agents = %d, want 2", len(rep.AgentRows))
	}
	var sum int64
	for _, a := range rep.AgentRows {
		if a.Requests == 0 || a.Connections != 4 || a.Error != "" {
			t.Errorf("agent %+v did no work or failed", a)
		}
		sum += a.Requests
	}
	if sum != rep.Requests {
		t.Errorf("agent rows sum to %d, report says %d", sum, rep.Requests)
	}
	if rep.Latency == nil || rep.Latency.P99 <= 0 || rep.Latency.Count != rep.Requests {
		t.Errorf("latency = %+v, want p99 > 0 over %d samples", rep.Latency, rep.Requests)
	}
	if len(progress) != 2 {
		t.Errorf("got %d progress messages, want 2 (one per interval)", len(progress))
	}
	if rep.StartSkewUs < 0 || rep.StartSkewUs > 50_000 {
		t.Errorf("start skew %vus", rep.StartSkewUs)
	}
	if d := rep.RPS - float64(rep.Requests)/2; d > 1e-6 || d < -1e-6 {
		t.Errorf("rps %v != requests/window %v", rep.RPS, float64(rep.Requests)/2)
	}
}

package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// TestAllowlistRefusesBeforeAnyPacket runs plans on two agents, agent-1
// with the default allowlist (loopback) and agent-2 admitting only the
// allowed target's port. A plan aimed outside agent-2's allowlist (by its
// URL, its --connect-to, or a mix on it) fails at prepare with
// PermissionDenied naming agent-2, the target and the resolved address,
// and neither agent opens a connection to anything: agent-1 had accepted
// its share but is never told to connect. Then a plan inside both
// allowlists runs on the same agents (they keep serving).
func TestAllowlistRefusesBeforeAnyPacket(t *testing.T) {
	allowed, b := targettest.Start(t)
	outside, _ := targettest.Start(t)
	_, allowedPort, _ := net.SplitHostPort(allowed.Addr())
	_, outsidePort, _ := net.SplitHostPort(outside.Addr())
	spec := "127.0.0.1:" + allowedPort

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 2, CPUsPerAgent: 1, Logger: quiet,
		Agent: func(i int, cfg *agent.Config) {
			if i == 1 {
				l, err := allow.Parse(spec)
				if err != nil {
					t.Fatal(err)
				}
				cfg.AllowTargets = l
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	}()

	outsideAddr := "127.0.0.1:" + outsidePort
	for _, tc := range []struct {
		name string
		p    plan.Plan
		want string
	}{
		{"url", plan.Plan{URL: outside.URL()},
			"agent agent-2 refuses the share: target " + outsideAddr + " is outside the allowlist " + spec},
		{"connect-to", plan.Plan{URL: allowed.URL(), ConnectTo: outsideAddr},
			"agent agent-2 refuses the share: connect_to " + outsideAddr + ": target " + outsideAddr + " is outside the allowlist " + spec},
		{"connect-to by name", plan.Plan{URL: allowed.URL(), ConnectTo: "localhost:" + outsidePort},
			"agent agent-2 refuses the share: connect_to localhost:" + outsidePort + ": target localhost:" + outsidePort + " (resolved to "},
		{"mix", plan.Plan{URL: outside.URL(), Mix: []plan.Request{
			{Method: "GET", URL: outside.URL() + "a", Weight: 1}, {Method: "GET", URL: outside.URL() + "b", Weight: 1}}},
			"agent agent-2 refuses the share: target " + outsideAddr + " is outside the allowlist " + spec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Connections, p.Duration, p.TLS = 4, 500*time.Millisecond, plan.TLS{CAPEM: b.CAPEM}
			res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunPlan = %v, %v; want PermissionDenied containing %q", res, err, tc.want)
			}
			if n, m := outside.Connections(), allowed.Connections(); n != 0 || m != 0 {
				t.Errorf("targets accepted %d and %d connections, want 0: no agent of a refused run may send anything", n, m)
			}
			// Both agents released the refused share (an agent still
			// holding it would refuse the next run as busy); a lost
			// gossip update waits for memberlist's push/pull (15 s).
			if err := c.WaitAgents(context.Background(), 2, 20*time.Second); err != nil {
				t.Fatalf("agents after the refusal: %v", err)
			}
		})
	}

	p := plan.Plan{URL: allowed.URL(), Connections: 4, Duration: 300 * time.Millisecond, TLS: plan.TLS{CAPEM: b.CAPEM}}
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	if err != nil {
		t.Fatalf("a plan inside the allowlists: %v", err)
	}
	if len(res.GetAgents()) != 2 || res.GetCounters().GetRequests() == 0 || allowed.Requests() == 0 {
		t.Errorf("a plan inside the allowlists: %d agent rows, %d requests, the target saw %d", len(res.GetAgents()), res.GetCounters().GetRequests(), allowed.Requests())
	}
	for _, m := range c.Coordinator.Agents() {
		want := allow.DefaultSpec
		if m.GetName() == "agent-2" {
			want = spec
		}
		if m.GetAllowTargets() != want || m.GetAllowTargetsOmitted() != 0 {
			t.Errorf("%s meta: allow_targets %q (%d omitted), want %q", m.GetName(), m.GetAllowTargets(), m.GetAllowTargetsOmitted(), want)
		}
	}
}

// TestCapsRefuseShares: an agent's --max-connections and --max-rate refuse
// (never clip) a share above them at prepare, with PermissionDenied naming
// the agent, the cap and the share's value; nothing reaches the target. A
// share within both runs.
func TestCapsRefuseShares(t *testing.T) {
	srv, b := targettest.Start(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 2, CPUsPerAgent: 1, Logger: quiet,
		Agent: func(i int, cfg *agent.Config) {
			if i == 0 {
				cfg.MaxConnections, cfg.MaxRate = 3, 100
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	}()
	open := func(rate int64, conns, maxConns int, stages ...plan.Stage) plan.Plan {
		return plan.Plan{Load: plan.OpenLoop, Rate: rate, Connections: conns, MaxConnections: maxConns, Stages: stages}
	}
	for _, tc := range []struct {
		name string
		p    plan.Plan
		want string
	}{
		{"connections", open(100, 8, 8),
			"agent agent-1 refuses the share: it asks 4 connections (its part of the plan's connections 8 over 2 agents), above the agent's --max-connections 3"},
		{"open-loop growth", open(100, 4, 10),
			"it asks 5 connections (its part of the plan's max_connections 10 over 2 agents), above the agent's --max-connections 3"},
		{"closed-loop stage", plan.Plan{Connections: 2, Stages: []plan.Stage{{Duration: time.Second, Connections: 8}}},
			"it asks 4 connections (its part of the plan's stages[0] target 8 over 2 agents), above the agent's --max-connections 3"},
		{"closed loop has no rate", plan.Plan{Connections: 2},
			"agent agent-1 refuses the share: its --max-rate is 100 requests/s and a closed-loop share has no rate bound"},
		{"rate", open(300, 2, 2),
			"it asks 150 requests/s (its part of the plan's rate 300 over 2 agents), above the agent's --max-rate 100"},
		{"stage rate", open(100, 2, 2, plan.Stage{Duration: time.Second, Rate: 202}),
			"it asks 101 requests/s (its part of the plan's stages[0] rate 202 over 2 agents), above the agent's --max-rate 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.URL, p.TLS = srv.URL(), plan.TLS{CAPEM: b.CAPEM}
			if len(p.Stages) == 0 {
				p.Duration = 500 * time.Millisecond
			}
			res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunPlan = %v, %v; want PermissionDenied containing %q", res, err, tc.want)
			}
			if n := srv.Connections(); n != 0 {
				t.Errorf("target accepted %d connections, want 0", n)
			}
			if err := c.WaitAgents(context.Background(), 2, 20*time.Second); err != nil {
				t.Fatalf("agents after the refusal: %v", err)
			}
		})
	}
	p := open(200, 6, 6)
	p.URL, p.TLS, p.Duration = srv.URL(), plan.TLS{CAPEM: b.CAPEM}, 300*time.Millisecond
	if _, err := c.Coordinator.RunPlan(context.Background(), p, nil); err != nil {
		t.Fatalf("a share at the caps (3 connections, 100 requests/s): %v", err)
	}
	if srv.Requests() == 0 {
		t.Error("a share at the caps sent nothing")
	}
	for _, m := range c.Coordinator.Agents() {
		if m.GetName() == "agent-1" && (m.GetMaxConnections() != 3 || m.GetMaxRate() != 100) {
			t.Errorf("agent-1 meta: max_connections %d, max_rate %d; want 3, 100", m.GetMaxConnections(), m.GetMaxRate())
		}
	}
}

// TestLongAllowlistFitsMeta: an allowlist longer than memberlist's 512-byte
// node meta is gossiped cut at an entry boundary, saying how many entries
// it left off, and the agent stays visible.
func TestLongAllowlistFitsMeta(t *testing.T) {
	var entries []string
	for i := range 100 {
		entries = append(entries, fmt.Sprintf("host-%03d.lab.example:443", i))
	}
	l, err := allow.Parse(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 1, CPUsPerAgent: 1, Logger: quiet,
		Agent: func(_ int, cfg *agent.Config) { cfg.AllowTargets = l }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	}()
	m := c.Coordinator.Agents()[0]
	got := m.GetAllowTargets()
	kept := strings.Split(got, ",")
	if size := proto.Size(m); size > memberlist.MetaMaxSize {
		t.Errorf("meta is %d bytes, over memberlist's %d", size, memberlist.MetaMaxSize)
	}
	if m.GetAllowTargetsOmitted() <= 0 || len(kept)+int(m.GetAllowTargetsOmitted()) != len(entries) ||
		strings.Join(entries[:len(kept)], ",") != got {
		t.Errorf("meta allow_targets %q with %d omitted; want a prefix of the %d entries and the rest counted", got, m.GetAllowTargetsOmitted(), len(entries))
	}
}

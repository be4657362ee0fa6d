package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// rejoinInterval is the agents' RejoinInterval in these tests.
const rejoinInterval = 100 * time.Millisecond

// memberAt starts a member bound to addr that rejoins every rejoinInterval.
func memberAt(t *testing.T, name string, role pb.Role, addr string) *Cluster {
	t.Helper()
	meta := &metaBox{m: &pb.NodeMeta{Role: role, Name: name, GrpcAddr: "127.0.0.1:1", Cpus: 2}}
	c, err := New(Config{
		Name: name, BindAddr: addr, Meta: meta.get, RejoinInterval: rejoinInterval,
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(time.Second) })
	return c
}

// testLogger logs at debug level to a buffer that is printed when the test
// fails (or with -v). memberlist logs from its own goroutines, possibly
// after the test ends, so it cannot log to t directly.
func testLogger(t *testing.T) *slog.Logger {
	buf := &safeBuffer{}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// crash stops c's gossip without announcing a leave, as a killed process
// would. It may be called from any goroutine (a failed shutdown is an
// Error, not a Fatal).
func crash(tb testing.TB, c *Cluster) {
	tb.Helper()
	c.shutdownOnce.Do(func() {
		close(c.done)
		if err := c.ml.Shutdown(); err != nil {
			tb.Error(err)
		}
	})
}

func names(ms []*pb.NodeMeta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.GetName())
	}
	return out
}

func has(c *Cluster, name string) bool {
	for _, m := range c.Members() {
		if m.GetName() == name {
			return true
		}
	}
	return false
}

// keepJoined joins agent to seed and runs KeepJoined until the test ends.
func keepJoined(t *testing.T, agent *Cluster, seed string) {
	t.Helper()
	if _, err := agent.Join(context.Background(), []string{seed}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { agent.KeepJoined(ctx, []string{seed}) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// restartSeed is how a test stops the seed ("coord") before starting a new
// one on the same address, under the same name.
type restartSeed func(t *testing.T, coord, agent *Cluster)

func testSeedRestart(t *testing.T, stop restartSeed) {
	coord := memberAt(t, "coord", pb.Role_ROLE_COORDINATOR, "127.0.0.1:0")
	addr := coord.Addr()
	agent := memberAt(t, "agent-1", pb.Role_ROLE_AGENT, "127.0.0.1:0")
	keepJoined(t, agent, addr)
	waitFor(t, "coordinator to list the agent", func() bool { return has(coord, "agent-1") })

	stop(t, coord, agent)
	restarted := time.Now()
	coord2 := memberAt(t, "coord", pb.Role_ROLE_COORDINATOR, addr)
	// The bound: well under memberlist's push/pull interval (15 s with
	// local timings), which would otherwise be the only way back.
	deadline := restarted.Add(5 * time.Second)
	for !has(coord2, "agent-1") || !has(agent, "coord") {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the restart: coordinator lists %v, agent lists %v", names(coord2.Members()), names(agent.Members()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("restarted coordinator lists %v after %v", names(coord2.Members()), time.Since(restarted).Round(time.Millisecond))
}

// TestRejoinAfterSeedLeaves: the coordinator leaves (SIGTERM) and a new one
// starts on its address; the agent rejoins it.
func TestRejoinAfterSeedLeaves(t *testing.T) {
	testSeedRestart(t, func(t *testing.T, coord, agent *Cluster) {
		if err := coord.Leave(time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "agent to see the coordinator leave", func() bool { return !has(agent, "coord") })
	})
}

// TestRejoinAfterSeedDies: the coordinator is killed; once the agent has
// found it dead, a new one starts on its address; the agent rejoins it.
func TestRejoinAfterSeedDies(t *testing.T) {
	testSeedRestart(t, func(t *testing.T, coord, agent *Cluster) {
		crash(t, coord)
		waitFor(t, "agent to find the coordinator dead", func() bool { return !has(agent, "coord") })
	})
}

// TestRejoinAfterQuickRestart: the coordinator is killed and restarted at
// once, before the agent finds it dead, so the seed never stops being a
// live member in the agent's view. The restarted coordinator's acks carry
// a new instance, and the agent rejoins it. Push/pull is off, so that it
// cannot be what heals the cluster.
func TestRejoinAfterQuickRestart(t *testing.T) {
	tweakMemberlist = func(mc *memberlist.Config) { mc.PushPullInterval = 0 }
	t.Cleanup(func() { tweakMemberlist = nil })
	testSeedRestart(t, func(t *testing.T, coord, agent *Cluster) {
		// Let gossip's retransmissions of the agent's join end first: one
		// reaching the new coordinator would introduce the agent to it.
		time.Sleep(2 * time.Second)
		crash(t, coord)
		if !has(agent, "coord") {
			t.Fatal("agent found the coordinator dead already")
		}
	})
}

// TestRejoinRetriesUntilSeedReturns: the seed stays away for several
// failed rejoins (backing off) and is rejoined when it returns.
func TestRejoinRetriesUntilSeedReturns(t *testing.T) {
	testSeedRestart(t, func(t *testing.T, coord, agent *Cluster) {
		if err := coord.Leave(time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * rejoinInterval) // a few failed rejoins, backing off
	})
}

// TestJoinErrorIsOneLine: memberlist's multi-error (one line per address,
// indented) is logged and returned on one line.
func TestJoinErrorIsOneLine(t *testing.T) {
	var buf safeBuffer
	c, err := New(Config{
		Name: "lonely", BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return &pb.NodeMeta{} },
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Leave(0) }()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = c.Join(ctx, []string{"127.0.0.1:1", "127.0.0.1:2"})
	if err == nil {
		t.Fatal("Join to closed ports succeeded")
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "127.0.0.1:1: ") || !strings.Contains(err.Error(), "; failed to join 127.0.0.1:2: ") {
		t.Errorf("Join error = %q, want one line naming both addresses", err)
	}
	var multi interface{ WrappedErrors() []error }
	if !errors.As(err, &multi) {
		t.Errorf("Join error %q does not wrap memberlist's error", err)
	}
	log := buf.String()
	if !strings.Contains(log, "join cluster: retrying") || strings.Contains(log, `\n`) || strings.Contains(log, `\t`) {
		t.Errorf("log:\n%s\nwant a retry line without escaped newlines or tabs", log)
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRejoinBacksOff: a seed that never answers is retried at doubling
// intervals, with one warning.
func TestRejoinBacksOff(t *testing.T) {
	var buf safeBuffer
	c, err := New(Config{
		Name: "lonely", BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return &pb.NodeMeta{} },
		RejoinInterval: 50 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Leave(0) }()
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	c.KeepJoined(ctx, []string{"127.0.0.1:1"}) // attempts at 50, 100, 200, 400, 800 ms
	var waits []string
	warns := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.Contains(line, "rejoin cluster: seed is not a live member; retrying") {
			continue
		}
		if strings.Contains(line, "level=WARN") {
			warns++
		}
		_, next, _ := strings.Cut(line, "next_in=")
		waits = append(waits, next)
	}
	if len(waits) < 4 || strings.Join(waits[:4], " ") != "50ms 100ms 200ms 400ms" || warns != 1 {
		t.Errorf("retries logged next_in %v with %d warnings, want 50ms 100ms 200ms 400ms ... and 1 warning; log:\n%s", waits, warns, buf.String())
	}
}

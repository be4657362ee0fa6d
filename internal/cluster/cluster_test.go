package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// metaBox holds a member's meta; memberlist reads it concurrently.
type metaBox struct {
	mu sync.Mutex
	m  *pb.NodeMeta
}

func (b *metaBox) get() *pb.NodeMeta {
	b.mu.Lock()
	defer b.mu.Unlock()
	return proto.Clone(b.m).(*pb.NodeMeta)
}

func (b *metaBox) setState(s pb.AgentState) {
	b.mu.Lock()
	b.m.State = s
	b.mu.Unlock()
}

func member(t *testing.T, name string, role pb.Role) (*Cluster, *metaBox) {
	t.Helper()
	meta := &metaBox{m: &pb.NodeMeta{Role: role, Name: name, GrpcAddr: "127.0.0.1:1", Cpus: 2, State: pb.AgentState_AGENT_STATE_IDLE}}
	c, err := New(Config{Name: name, BindAddr: "127.0.0.1:0", Meta: meta.get, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(time.Second) })
	return c, meta
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMembershipAndMeta(t *testing.T) {
	coord, _ := member(t, "coord", pb.Role_ROLE_COORDINATOR)
	agent, meta := member(t, "agent-1", pb.Role_ROLE_AGENT)
	if _, err := agent.Join(context.Background(), []string{coord.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two members", func() bool { return len(coord.Members()) == 2 })
	got := coord.Members()
	if got[0].GetName() != "agent-1" || got[0].GetRole() != pb.Role_ROLE_AGENT || got[0].GetCpus() != 2 {
		t.Fatalf("members = %v", got)
	}
	meta.setState(pb.AgentState_AGENT_STATE_RUNNING)
	if err := agent.UpdateMeta(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "state update", func() bool { return coord.Members()[0].GetState() == pb.AgentState_AGENT_STATE_RUNNING })
	if err := agent.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent gone", func() bool { return len(coord.Members()) == 1 })
}

// TestUpdateMetaRedoesADroppedUpdate plays memberlist's dropped update:
// UpdateNode serves the new meta, but a refutation made between drawing
// its incarnation and taking the node lock keeps the old meta in
// memberlist's state, and UpdateNode only times out. UpdateMeta must see
// that the state does not hold the meta served and update again, so the
// coordinator lists the new state; without that, only the next state
// change would gossip it (push/pulls carry the old meta too). A member
// whose every update is dropped gets an error that says so.
func TestUpdateMetaRedoesADroppedUpdate(t *testing.T) {
	coord, _ := member(t, "coord", pb.Role_ROLE_COORDINATOR)
	agent, meta := member(t, "agent-1", pb.Role_ROLE_AGENT)
	if _, err := agent.Join(context.Background(), []string{coord.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two members", func() bool { return len(coord.Members()) == 2 })
	real := agent.updateNode
	var calls int
	drop := func(time.Duration) error {
		agent.mc.Delegate.NodeMeta(memberlist.MetaMaxSize) // served, never applied
		return errors.New("timeout waiting for update broadcast")
	}
	agent.updateNode = func(timeout time.Duration) error {
		calls++
		if calls == 1 {
			return drop(timeout)
		}
		return real(timeout)
	}
	meta.setState(pb.AgentState_AGENT_STATE_RUNNING)
	if err := agent.UpdateMeta(time.Second); err != nil {
		t.Fatalf("UpdateMeta after one dropped update: %v", err)
	}
	if calls != 2 {
		t.Fatalf("UpdateMeta called UpdateNode %d times, want 2 (one dropped, one applied)", calls)
	}
	// waitFor's 10 s end before the first push/pull (15 s) could repair it.
	waitFor(t, "the redone update at the coordinator", func() bool {
		return coord.Members()[0].GetState() == pb.AgentState_AGENT_STATE_RUNNING
	})

	calls = 0
	agent.updateNode = func(timeout time.Duration) error { calls++; return drop(timeout) }
	meta.setState(pb.AgentState_AGENT_STATE_DRAINING)
	err := agent.UpdateMeta(time.Second)
	if !errors.Is(err, ErrMetaDropped) {
		t.Fatalf("UpdateMeta with every update dropped: err = %v", err)
	}
	if calls != metaUpdates {
		t.Fatalf("UpdateMeta called UpdateNode %d times, want %d", calls, metaUpdates)
	}
}

func TestJoinGivesUpWithContext(t *testing.T) {
	c, _ := member(t, "lonely", pb.Role_ROLE_AGENT)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := c.Join(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("Join to a closed port succeeded")
	}
}

// TestSmallClusterMetaReachesEveryMember checks that in a cluster of four
// (three agents and a coordinator, the local timings), every meta update
// of one member reaches the coordinator within one second, well before a
// push-pull (15 s) would repair a miss. With memberlist's local
// retransmission limit (2 × ceil(log10(N+1)) = 2) the first gossip round
// reached two of the three peers and the coordinator then depended on the
// others relaying, which missed about one update in 30 (an agent listed
// draining for up to 15 s after its share ended).
func TestSmallClusterMetaReachesEveryMember(t *testing.T) {
	coord, _ := member(t, "coord", pb.Role_ROLE_COORDINATOR)
	sender, meta := member(t, "agent-1", pb.Role_ROLE_AGENT)
	for _, name := range []string{"agent-2", "agent-3"} {
		c, _ := member(t, name, pb.Role_ROLE_AGENT)
		if _, err := c.Join(context.Background(), []string{coord.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sender.Join(context.Background(), []string{coord.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four members", func() bool { return len(coord.Members()) == 4 && len(sender.Members()) == 4 })
	stateAt := func(name string) pb.AgentState {
		for _, m := range coord.Members() {
			if m.GetName() == name {
				return m.GetState()
			}
		}
		return pb.AgentState_AGENT_STATE_UNSPECIFIED
	}
	const updates = 60
	const within = time.Second
	var missed int
	for i := range updates {
		want := pb.AgentState_AGENT_STATE_DRAINING
		if i%2 == 1 {
			want = pb.AgentState_AGENT_STATE_IDLE
		}
		meta.setState(want)
		_ = sender.UpdateMeta(time.Second)
		deadline := time.Now().Add(within)
		for stateAt("agent-1") != want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := stateAt("agent-1"); got != want {
			missed++
			t.Errorf("update %d (%v): the coordinator still lists %v after %v", i, want, got, within)
			for stateAt("agent-1") != want && time.Now().Before(deadline.Add(20*time.Second)) {
				time.Sleep(50 * time.Millisecond) // a push-pull repairs it
			}
		}
	}
	if missed > 0 {
		t.Logf("%d of %d updates missed the coordinator for %v", missed, updates, within)
	}
}

// TestLeaveUnconfirmed: a member whose only peer vanished without leaving
// (its gossip shut down, as when a whole cluster is stopped at once) gets
// ErrLeaveUnconfirmed from Leave, which callers log as information; with
// the peer still running the leave is taken and Leave returns nil.
func TestLeaveUnconfirmed(t *testing.T) {
	coord, _ := member(t, "coord", pb.Role_ROLE_COORDINATOR)
	agent, _ := member(t, "agent-1", pb.Role_ROLE_AGENT)
	other, _ := member(t, "agent-2", pb.Role_ROLE_AGENT)
	for _, m := range []*Cluster{agent, other} {
		if _, err := m.Join(context.Background(), []string{coord.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three members", func() bool { return len(coord.Members()) == 3 && len(agent.Members()) == 3 })
	if err := other.Leave(3 * time.Second); err != nil { // a few gossip rounds, on a loaded machine
		t.Fatalf("leave with live peers: %v, want nil", err)
	}
	waitFor(t, "two members", func() bool { return len(agent.Members()) == 2 })
	coord.shutdownOnce.Do(func() { // gone without a word (its Leave, at cleanup, then does nothing)
		close(coord.done)
		if err := coord.ml.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	if err := agent.Leave(200 * time.Millisecond); !errors.Is(err, ErrLeaveUnconfirmed) {
		t.Fatalf("leave after the only peer vanished: %v, want ErrLeaveUnconfirmed", err)
	}
}

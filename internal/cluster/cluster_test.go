package cluster

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

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

func TestJoinGivesUpWithContext(t *testing.T) {
	c, _ := member(t, "lonely", pb.Role_ROLE_AGENT)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := c.Join(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("Join to a closed port succeeded")
	}
}

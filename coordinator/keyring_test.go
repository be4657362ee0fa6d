package coordinator_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func gossipKey(t *testing.T) []byte {
	t.Helper()
	k, err := cluster.ParseKey(cluster.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func agentNames(c *coordinator.Coordinator) []string {
	var out []string
	for _, m := range c.Agents() {
		out = append(out, m.GetName())
	}
	return out
}

// membershipWatch samples the coordinator's agents every 20 ms until
// stopped and records every sample that is not want.
type membershipWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
	bad  []string // guarded by wg: read after stopped
}

func watchMembership(c *coordinator.Coordinator, want []string) *membershipWatch {
	w := &membershipWatch{stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if got := agentNames(c); !slices.Equal(got, want) {
				w.bad = append(w.bad, strings.Join(got, ","))
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *membershipWatch) stopped() []string {
	close(w.stop)
	w.wg.Wait()
	return w.bad
}

// keyring calls Coordinator.Keyring and fails the test on an error or on
// any member's error.
func keyring(t *testing.T, c *coordinator.Coordinator, op pb.KeyringOp, key []byte) *pb.KeyringResponse {
	t.Helper()
	resp, err := c.Keyring(context.Background(), op, key)
	if err != nil {
		t.Fatalf("keyring %v: %v", op, err)
	}
	if len(resp.GetMembers()) != 3 {
		t.Fatalf("keyring %v: %d members answered, want 3", op, len(resp.GetMembers()))
	}
	for _, m := range resp.GetMembers() {
		if m.GetError() != "" {
			t.Fatalf("keyring %v: member %s: %s", op, m.GetName(), m.GetError())
		}
	}
	return resp
}

// counts renders a response's keys as "K1:members/primary ..." with names
// for the keys given.
func counts(resp *pb.KeyringResponse, names map[string][]byte) string {
	var parts []string
	for _, kc := range resp.GetKeys() {
		name := "?"
		for n, k := range names {
			if bytes.Equal(k, kc.GetKey()) {
				name = n
			}
		}
		parts = append(parts, name+":"+strings.Repeat("m", int(kc.GetMembers()))+"/"+strings.Repeat("p", int(kc.GetPrimary())))
	}
	return strings.Join(parts, " ")
}

// startAgent starts an agent with the given key file joining the
// coordinator, run until the test ends.
func startAgent(t *testing.T, name, keyFile string, coord *coordinator.Coordinator) {
	t.Helper()
	a, err := agent.New(agent.Config{
		Name: name, GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Join: []string{coord.GossipAddr()},
		GossipKeyFile: keyFile, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "agent "+name, a.Run)
}

// runUntilCleanup runs a daemon's Run until the test ends, then stops it
// and checks its error.
func runUntilCleanup(t *testing.T, name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
}

// TestKeyringRotation rotates the gossip key of a running coordinator and
// two agents as Consul's guide does (install the new key, use it, remove
// the old one): every member applies each step, the refusals (use before
// install, remove of the primary) change nothing, the coordinator sees
// both agents at every 20 ms sample throughout and for 3 s after, each
// member's key file ends holding only the new key, and afterwards an agent
// with only the old key cannot join while one with the new key can.
func TestKeyringRotation(t *testing.T) {
	k1, k2 := gossipKey(t), gossipKey(t)
	names := map[string][]byte{"k1": k1, "k2": k2}
	dir := t.TempDir()
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 2, CPUsPerAgent: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		GossipKeys: [][]byte{k1}, KeyDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	co := c.Coordinator
	want := []string{"agent-1", "agent-2"}
	watch := watchMembership(co, want)

	if got := counts(keyring(t, co, pb.KeyringOp_KEYRING_OP_LIST, nil), names); got != "k1:mmm/ppp" {
		t.Errorf("list at start = %s, want k1:mmm/ppp (3 members, 3 primary)", got)
	}
	_, err = co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_USE, k2)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "agent-1, agent-2, coordinator") {
		t.Errorf("use before install = %v, want FailedPrecondition naming agent-1, agent-2, coordinator", err)
	}
	if got := counts(keyring(t, co, pb.KeyringOp_KEYRING_OP_INSTALL, k2), names); got != "k1:mmm/ppp k2:mmm/" {
		t.Errorf("after install k2 = %s, want k1:mmm/ppp k2:mmm/", got)
	}
	_, err = co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_REMOVE, k1)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), ": it is the primary key of agent-1, agent-2, coordinator; nothing changed") || strings.Contains(err.Error(), "may be") {
		t.Errorf("remove of the primary = %v, want FailedPrecondition saying it is the primary key of agent-1, agent-2, coordinator", err)
	}
	if got := counts(keyring(t, co, pb.KeyringOp_KEYRING_OP_USE, k2), names); got != "k2:mmm/ppp k1:mmm/" {
		t.Errorf("after use k2 = %s, want k2:mmm/ppp k1:mmm/", got)
	}
	if got := counts(keyring(t, co, pb.KeyringOp_KEYRING_OP_REMOVE, k1), names); got != "k2:mmm/ppp" {
		t.Errorf("after remove k1 = %s, want k2:mmm/ppp", got)
	}
	for _, err := range []error{
		func() error {
			_, err := co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_INSTALL, k1[:16])
			return err
		}(),
		func() error {
			_, err := co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_UNSPECIFIED, nil)
			return err
		}(),
	} {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("bad request: %v, want InvalidArgument", err)
		}
	}

	// Gossip now goes out under k2 only; a member left on k1 would fail
	// its probes and be suspected, then dead, within a few seconds.
	time.Sleep(3 * time.Second)
	if bad := watch.stopped(); len(bad) > 0 {
		t.Errorf("membership changed during the rotation: %d samples not [agent-1 agent-2], first %q", len(bad), bad[0])
	}
	for _, name := range []string{"coordinator", "agent-1", "agent-2"} {
		kf, err := cluster.ReadKeyFile(localcluster.KeyFile(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(kf.Keys) != 1 || !bytes.Equal(kf.Keys[0], k2) {
			t.Errorf("%s's key file: %d keys (k2 first: %v), want only k2", name, len(kf.Keys), len(kf.Keys) > 0 && bytes.Equal(kf.Keys[0], k2))
		}
	}

	oldFile, newFile := dir+"/old.keys", dir+"/new.keys"
	if err := cluster.WriteKeyFile(oldFile, [][]byte{k1}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WriteKeyFile(newFile, [][]byte{k2}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, "agent-old", oldFile, co)
	startAgent(t, "agent-new", newFile, co)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(agentNames(co), "agent-new") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// agent-old has retried its join each second as long as agent-new
	// took to join, and at least 2 s.
	time.Sleep(2 * time.Second)
	if got := agentNames(co); !slices.Equal(got, []string{"agent-1", "agent-2", "agent-new"}) {
		t.Errorf("after the rotation the coordinator sees %v, want [agent-1 agent-2 agent-new] (the old key's agent kept out)", got)
	}
}

// TestKeyringWithoutEncryption: a cluster started without gossip keys
// refuses keyring operations (FailedPrecondition), as Serf does.
func TestKeyringWithoutEncryption(t *testing.T) {
	c, err := localcluster.Start(context.Background(), 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Coordinator.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_LIST, nil)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--gossip-key-file") {
		t.Errorf("list without encryption = %v, want FailedPrecondition naming --gossip-key-file", err)
	}
}

// TestKeyringOverTLS: on a cluster whose hops are all mutual TLS, with two
// coordinators, a keyring operation reaches every member: the agents over
// the coordinator-to-agent hop, the other coordinator by its MemberKeyring,
// dialled with the coordinator's certificate (a coordinator's server admits
// the coordinator role).
func TestKeyringOverTLS(t *testing.T) {
	pki := securitytest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k1, k2 := gossipKey(t), gossipKey(t)
	dir := t.TempDir()
	c, err := localcluster.StartWith(context.Background(), localcluster.Options{
		Agents: 2, CPUsPerAgent: 1, Logger: log, GossipKeys: [][]byte{k1}, KeyDir: dir,
		CoordinatorSecurity: pki.Config(t, security.RoleCoordinator), AgentSecurity: pki.Config(t, security.RoleAgent),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
	})
	file := localcluster.KeyFile(dir, "coordinator-2")
	if err := cluster.WriteKeyFile(file, [][]byte{k1}); err != nil {
		t.Fatal(err)
	}
	co2, err := coordinator.New(coordinator.Config{
		Name: "coordinator-2", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Join: []string{c.Coordinator.GossipAddr()},
		GossipKeyFile: file, Security: pki.Config(t, security.RoleCoordinator), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "coordinator-2", co2.Run)
	co := c.Coordinator
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_LIST, nil)
		if err == nil && len(resp.GetMembers()) == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := co.Keyring(context.Background(), pb.KeyringOp_KEYRING_OP_INSTALL, k2)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range resp.GetMembers() {
		rows = append(rows, m.GetName()+":"+m.GetError())
	}
	if want := []string{"agent-1:", "agent-2:", "coordinator:", "coordinator-2:"}; !slices.Equal(rows, want) {
		t.Errorf("install over mutual TLS: members %q, want %q (no errors)", rows, want)
	}
	kf, err := cluster.ReadKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(kf.Keys) != 2 || !bytes.Equal(kf.Keys[1], k2) {
		t.Errorf("coordinator-2's key file: %d keys, want k1 then k2", len(kf.Keys))
	}
}

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/cluster"
)

// startKeyedAgent starts an agent process joining c with extra flags
// (--gossip-key-file, --cluster-label).
func startKeyedAgent(t *testing.T, c *procCluster, name string, extra ...string) *proc {
	t.Helper()
	ports := freePorts(t, 2)
	args := append([]string{"--grpc-addr", loopback(ports[0]), "--gossip-addr", loopback(ports[1]),
		"--join", c.gossipAddr, "--name", name, "--local"}, extra...)
	return startProc(t, name, true, procEnv(), procBinary(t, "agent"), args...)
}

// agentNames returns the names of the agents c's coordinator lists.
func (c *procCluster) agentNames(t *testing.T) []string {
	t.Helper()
	agents, err := listAgents(context.Background(), c.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range agents {
		out = append(out, a.GetName())
	}
	return out
}

// TestProcGossipKey runs the binaries with gossip encryption: a coordinator
// and an agent with the key form a cluster; an agent without the key, one
// with another key and one with another cluster label never join it (each
// keeps retrying its join: it sees no member); the key rotates with
// coordctl keyring while the cluster keeps its agent, whose rewritten key
// file brings it back after a restart; a malformed key file stops an agent
// at start naming the file and the line.
func TestProcGossipKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name string) string { return filepath.Join(dir, name+".keys") }
	if _, stderr, code := runCoordctl(t, 10*time.Second, procEnv(), "keygen", "--out", keyFile("coordinator")); code != 0 {
		t.Fatalf("coordctl keygen: exit %d: %s", code, stderr)
	}
	kf, err := cluster.ReadKeyFile(keyFile("coordinator"))
	if err != nil {
		t.Fatal(err)
	}
	oldKey := cluster.EncodeKey(kf.Keys[0])
	for _, name := range []string{"keyed", "label"} {
		if err := cluster.WriteKeyFile(keyFile(name), kf.Keys); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := cluster.ParseKey(cluster.GenerateKey())
	if err := cluster.WriteKeyFile(keyFile("otherkey"), [][]byte{other}); err != nil {
		t.Fatal(err)
	}

	ports := freePorts(t, 2)
	c := &procCluster{grpcAddr: loopback(ports[0]), gossipAddr: loopback(ports[1])}
	c.coord = startProc(t, "coordinator", true, procEnv(), procBinary(t, "coordinator"),
		"--grpc-addr", c.grpcAddr, "--gossip-addr", c.gossipAddr, "--name", "proc-coordinator", "--local",
		"--gossip-key-file", keyFile("coordinator"))
	keyed := startKeyedAgent(t, c, "keyed", "--gossip-key-file", keyFile("keyed"))
	if err := waitUntil(procReadyTimeout, keyed, func(ctx context.Context) error { return c.agentsIdle(ctx, "keyed") }); err != nil {
		t.Fatalf("keyed agent not listed: %v\n%s\n%s", err, keyed.describe(), c.coord.describe())
	}

	rogues := []*proc{
		startKeyedAgent(t, c, "nokey"),
		startKeyedAgent(t, c, "otherkey", "--gossip-key-file", keyFile("otherkey")),
		startKeyedAgent(t, c, "label", "--gossip-key-file", keyFile("label"), "--cluster-label", "staging"),
	}
	// Each retries its join every second; a joined agent would be listed
	// within a probe interval of its join.
	time.Sleep(3 * time.Second)
	if got := c.agentNames(t); !slices.Equal(got, []string{"keyed"}) {
		t.Errorf("coordinator lists %v, want only [keyed]", got)
	}
	for _, r := range rogues {
		if r.Exited() || !strings.Contains(r.Stderr(), "join cluster: retrying") {
			t.Errorf("%s: want it still retrying its join, stderr:\n%s", r.name, r.Stderr())
		}
	}
	// Each says at start how it gossips.
	for p, want := range map[*proc]string{keyed: "gossip_keys=1 cluster_label=phalanx", rogues[0]: "gossip_keys=0 cluster_label=phalanx", rogues[2]: "gossip_keys=1 cluster_label=staging"} {
		if !strings.Contains(p.Stderr(), want) {
			t.Errorf("%s: start log does not say %q:\n%s", p.name, want, p.Stderr())
		}
	}

	// Rotate: install, use, remove.
	stdout, _, _ := runCoordctl(t, 10*time.Second, procEnv(), "keygen")
	newKey := strings.TrimSpace(stdout)
	for _, step := range [][]string{{"install", newKey}, {"use", newKey}, {"remove", oldKey}} {
		if _, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "--coordinator", c.grpcAddr, "keyring", step[0], step[1]); code != 0 {
			t.Fatalf("keyring %s: exit %d: %s", step[0], code, stderr)
		}
	}
	stdout, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), "--coordinator", c.grpcAddr, "keyring", "list")
	if code != 0 || !strings.Contains(stdout, newKey) || strings.Contains(stdout, oldKey) || !strings.Contains(stdout, "2/2") {
		t.Errorf("keyring list after rotation: exit %d, %q, %s; want only the new key, on 2/2 members", code, stdout, stderr)
	}
	for _, p := range []*proc{c.coord, keyed} {
		if strings.Contains(p.Stderr(), newKey) || strings.Contains(p.Stderr(), oldKey) {
			t.Errorf("%s logged a gossip key", p.name)
		}
	}

	// The agent restarts from its rewritten key file and is back.
	keyed.mayExit.Store(true)
	if err := keyed.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, ok := keyed.Wait(procStopTimeout); !ok || code != 0 {
		t.Fatalf("keyed agent: exit %d (exited %v) on SIGTERM", code, ok)
	}
	// Its log says how it listened (each address labelled, listen and
	// advertised), what protects it (no TLS, encrypted gossip: not a
	// blanket "insecure"), and that it was shut down by the signal.
	for _, want := range []string{"grpc_listen=127.0.0.1:", "grpc_advertise=127.0.0.1:", "gossip_listen=127.0.0.1:", "gossip_advertise=127.0.0.1:",
		"grpc_tls=off gossip_encryption=on", `msg="shutting down" signal=terminated`, `msg="agent stopped"`} {
		if !strings.Contains(keyed.Stderr(), want) {
			t.Errorf("keyed agent's log does not say %q\n%s", want, keyed.describe())
		}
	}
	if strings.Contains(keyed.Stderr(), "security=insecure") {
		t.Errorf("keyed agent's log says security=insecure with gossip encryption on\n%s", keyed.describe())
	}
	for _, want := range []string{"grpc_listen=" + c.grpcAddr, "gossip_listen=" + c.gossipAddr, "gossip_advertise=" + c.gossipAddr, "grpc_tls=off gossip_encryption=on"} {
		if !strings.Contains(c.coord.Stderr(), want) {
			t.Errorf("coordinator's log does not say %q\n%s", want, c.coord.describe())
		}
	}
	again := startKeyedAgent(t, c, "keyed", "--gossip-key-file", keyFile("keyed"))
	if err := waitUntil(procReadyTimeout, again, func(ctx context.Context) error { return c.agentsIdle(ctx, "keyed") }); err != nil {
		t.Fatalf("restarted agent not listed: %v\n%s", err, again.describe())
	}

	// A malformed key file is a start error naming file and line.
	bad := keyFile("bad")
	if err := os.WriteFile(bad, []byte(newKey+"\nnot-base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startKeyedAgent(t, c, "bad", "--gossip-key-file", bad)
	b.mayExit.Store(true)
	code, ok := b.Wait(procReadyTimeout)
	if !ok || code != 1 || !strings.Contains(b.Stderr(), bad+": line 2: gossip key is not valid base64") {
		t.Errorf("agent with a malformed key file: exit %d (exited %v), stderr %q; want 1 naming %s line 2", code, ok, b.Stderr(), bad)
	}
}

package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// fakeResolver answers LookupHost and LookupSRV from maps the test changes
// while members run, as a DNS server behind a Kubernetes headless Service
// would when a pod is replaced.
type fakeResolver struct {
	mu      sync.Mutex
	hosts   map[string][]string
	srv     map[string][]*net.SRV
	lookups map[string]int
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{hosts: map[string][]string{}, srv: map[string][]*net.SRV{}, lookups: map[string]int{}}
}

func (r *fakeResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = ips
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	if ips, ok := r.hosts[host]; ok {
		return slices.Clone(ips), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if service != "" || proto != "" {
		return "", nil, fmt.Errorf("fake resolver: want a direct lookup, got service %q proto %q", service, proto)
	}
	r.lookups["srv:"+name]++
	if s, ok := r.srv[name]; ok {
		return name, s, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// resolvedMember starts a member on addr that resolves names with r and
// rejoins every rejoinInterval.
func resolvedMember(t *testing.T, name, addr string, r Resolver) *Cluster {
	t.Helper()
	meta := &metaBox{m: &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: name, GrpcAddr: "127.0.0.1:1", Cpus: 1}}
	c, err := New(Config{Name: name, BindAddr: addr, Meta: meta.get, RejoinInterval: rejoinInterval, Resolver: r, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(time.Second) })
	return c
}

// sharedPortMembers starts members named agent-1.. on 127.0.0.2, .3, ...
// (loopback answers all of 127/8), all on one port, as pods behind a
// headless Service listen on one port at different addresses. It returns
// them and the port.
func sharedPortMembers(t *testing.T, n int) ([]*Cluster, string) {
	t.Helper()
	first := memberAt(t, "agent-1", pb.Role_ROLE_AGENT, "127.0.0.2:0")
	_, port, _ := net.SplitHostPort(first.Addr())
	out := []*Cluster{first}
	for i := 2; i <= n; i++ {
		out = append(out, memberAt(t, "agent-"+strconv.Itoa(i), pb.Role_ROLE_AGENT, net.JoinHostPort("127.0.0."+strconv.Itoa(i+1), port)))
	}
	return out, port
}

// TestJoinNameOfThreeAddresses: --join with a name resolving to three
// addresses contacts all three members (memberlist counts each push/pull);
// after one is replaced under the same member name at a new address
// (a StatefulSet pod rescheduled: the old one left, the DNS name now
// resolves to the new one), KeepJoined resolves the name again and joins it.
// The new member joins no one itself and push/pull (15 s) is far off, so
// only the rejoin can find it.
func TestJoinNameOfThreeAddresses(t *testing.T) {
	testJoinNameReplaced(t, func(c, coord *Cluster) {
		if err := c.Leave(time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "coordinator to see agent-3 leave", func() bool { return !has(coord, "agent-3") })
	})
}

// TestJoinNameReplacedAfterDeath: as TestJoinNameOfThreeAddresses, but the
// old agent-3 is killed (its node failed) and found dead: its name comes
// back from the new address after DeadNodeReclaimTime.
func TestJoinNameReplacedAfterDeath(t *testing.T) {
	testJoinNameReplaced(t, func(c, coord *Cluster) {
		crash(t, c)
		// Suspicion lasts up to SuspicionMaxTimeoutMult (6) times its
		// minimum without other members' confirmations: about 13 s with
		// local timings and four members.
		deadline := time.Now().Add(30 * time.Second)
		for has(coord, "agent-3") {
			if time.Now().After(deadline) {
				t.Fatal("30 s after agent-3 died, the coordinator still lists it")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// testJoinNameReplaced runs TestJoinNameOfThreeAddresses with stop ending
// the old agent-3 and waiting until coord no longer lists it.
func testJoinNameReplaced(t *testing.T, stop func(c, coord *Cluster)) {
	agents, port := sharedPortMembers(t, 3)
	r := newFakeResolver()
	r.set("agents.phalanx.test", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	coord := resolvedMember(t, "coord", "127.0.0.1:0", r)
	seed := net.JoinHostPort("agents.phalanx.test", port)

	n, err := coord.Join(context.Background(), []string{seed})
	if err != nil || n != 3 {
		t.Fatalf("Join(%q) = %d, %v; want 3 members contacted", seed, n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { coord.KeepJoined(ctx, []string{seed}) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitFor(t, "coordinator to list the three agents", func() bool {
		return has(coord, "agent-1") && has(coord, "agent-2") && has(coord, "agent-3")
	})

	stop(agents[2], coord)
	replaced := memberAt(t, "agent-3", pb.Role_ROLE_AGENT, net.JoinHostPort("127.0.0.5", port))
	lookups := r.count("agents.phalanx.test")
	r.set("agents.phalanx.test", "127.0.0.2", "127.0.0.3", "127.0.0.5")
	deadline := time.Now().Add(5 * time.Second)
	for !has(coord, "agent-3") || !has(replaced, "coord") {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the replacement: coordinator lists %v, the new agent-3 lists %v", names(coord.Members()), names(replaced.Members()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := coord.memberAddr("agent-3"); got != net.JoinHostPort("127.0.0.5", port) {
		t.Errorf("agent-3's address = %q, want the new one 127.0.0.5:%s", got, port)
	}
	if r.count("agents.phalanx.test") <= lookups {
		t.Error("agent-3 was found without the name being looked up again")
	}
}

// memberAddr returns the gossip address of the live member name, or "".
func (c *Cluster) memberAddr(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[name]
}

// TestJoinSRV: a dns+srv:// seed joins every target of the record at the
// record's port.
func TestJoinSRV(t *testing.T) {
	agents, port := sharedPortMembers(t, 2)
	p, _ := strconv.Atoi(port)
	r := newFakeResolver()
	r.set("agent-1.agents.test", "127.0.0.2")
	r.set("agent-2.agents.test", "127.0.0.3")
	const rec = "_gossip._tcp.agents.test"
	r.srv[rec] = []*net.SRV{{Target: "agent-1.agents.test.", Port: uint16(p)}, {Target: "agent-2.agents.test.", Port: uint16(p)}}
	coord := resolvedMember(t, "coord", "127.0.0.1:0", r)
	n, err := coord.Join(context.Background(), []string{SRVScheme + rec})
	if err != nil || n != len(agents) {
		t.Fatalf("Join(%s%s) = %d, %v; want %d", SRVScheme, rec, n, err, len(agents))
	}
}

// TestResolveSeed: the seed forms and their errors, each naming the seed.
func TestResolveSeed(t *testing.T) {
	r := newFakeResolver()
	r.set("two.test", "127.0.0.7", "::1")
	r.set("bad.test", "not-an-ip")
	r.srv["_g._tcp.empty.test"] = nil
	c := resolvedMember(t, "m", "127.0.0.1:0", r)
	_, ownPort, _ := net.SplitHostPort(c.Addr())
	for _, tc := range []struct {
		seed string
		want []string
		err  string
	}{
		{seed: "127.0.0.9:7946", want: []string{"127.0.0.9:7946"}},
		{seed: "[::1]:7946", want: []string{"[::1]:7946"}},
		{seed: "127.0.0.9", want: []string{"127.0.0.9:" + ownPort}},
		{seed: "coord/127.0.0.9:7946", want: []string{"coord/127.0.0.9:7946"}},
		{seed: "two.test:7000", want: []string{"127.0.0.7:7000", "[::1]:7000"}},
		{seed: "nope.test:7000", err: `seed "nope.test:7000": look up nope.test: `},
		{seed: "bad.test:7000", err: `bad address "not-an-ip"`},
		{seed: "two.test:0", err: `seed "two.test:0": bad port "0"`},
		{seed: "/127.0.0.9:1", err: "empty member name"},
		{seed: SRVScheme, err: "no record name"},
		{seed: SRVScheme + "_g._tcp.empty.test", err: "SRV record has no target"},
		{seed: SRVScheme + "_g._tcp.none.test", err: "look up SRV record"},
	} {
		got, err := c.resolveSeed(context.Background(), tc.seed)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("resolveSeed(%q) = %v, %v; want an error containing %q", tc.seed, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("resolveSeed(%q) = %v, %v; want %v", tc.seed, got, err, tc.want)
		}
	}
}

// TestJoinRetriesLookup: a name that does not resolve yet (a headless
// Service before its first pod) is looked up again at each retry, and Join
// succeeds once it resolves.
func TestJoinRetriesLookup(t *testing.T) {
	agents, port := sharedPortMembers(t, 1)
	r := newFakeResolver()
	coord := resolvedMember(t, "coord", "127.0.0.1:0", r)
	var wg sync.WaitGroup
	wg.Go(func() {
		for r.count("late.test") < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		r.set("late.test", "127.0.0.2")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := coord.Join(ctx, []string{net.JoinHostPort("late.test", port)})
	wg.Wait()
	if err != nil || n != 1 {
		t.Fatalf("Join = %d, %v; want the member found once the name resolved", n, err)
	}
	waitFor(t, "agent-1 to list the coordinator", func() bool { return has(agents[0], "coord") })
}

package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Config configures a cluster member.
type Config struct {
	// Name is the member's unique name in the cluster. Required.
	Name string
	// BindAddr is the gossip host:port (TCP and UDP). Port 0 picks a free
	// port. Default (and zero) DefaultBindAddr.
	BindAddr string
	// Meta returns the member's current meta; it is called by memberlist
	// whenever it gossips this node and must not block. Required.
	Meta func() *pb.NodeMeta
	// LAN selects memberlist.DefaultLANConfig timings; false selects
	// DefaultLocalConfig (faster failure detection, for one host and tests)
	// with the LAN RetransmitMult, 4 (see New).
	LAN bool
	// Logger receives memberlist's log lines at their level. Default
	// slog.Default().
	Logger *slog.Logger
	// RejoinInterval is how often KeepJoined checks that its seeds are live
	// members. A seed's failed rejoins back off, doubling up to
	// MaxRejoinBackoff (or RejoinInterval, when longer). Default
	// DefaultRejoinInterval.
	RejoinInterval time.Duration
	// Keys are the gossip encryption keys (each KeySize bytes, AES-256),
	// the first being the primary: memberlist's keyring, with
	// GossipVerifyIncoming and GossipVerifyOutgoing, so that this member
	// neither accepts nor sends a plaintext message. Default (and empty):
	// no encryption, unless KeyFile is set.
	Keys [][]byte
	// KeyFile names a gossip key file (ReadKeyFile's format) that New
	// reads the keys from (Keys must then be empty) and that every keyring
	// change (InstallKey, UseKey, RemoveKey) rewrites, so that a restart
	// keeps the keyring, as Serf's keyring file does. New warns when the
	// file is readable by group or others. Default (and zero): none.
	KeyFile string
	// Label is the cluster label, sent with (and authenticated in) every
	// gossip packet and stream: a member drops whatever carries another
	// label, so two clusters on one network never merge (memberlist's
	// Config.Label; at most 255 bytes). Default (and zero) DefaultLabel.
	Label string
	// OnMember, when set, is called with a member's meta each time
	// memberlist reports that it joined or changed its meta, and with nil
	// when it left. It runs under memberlist's lock (its event delivery):
	// it must not block nor call into the Cluster. Default: none.
	OnMember func(name string, m *pb.NodeMeta)
	// DeadNodeReclaimTime is how long after a member was found dead its
	// name may come back from another address (a Kubernetes StatefulSet pod
	// rescheduled after its node failed keeps its name and gets a new
	// address); before that memberlist refuses it as a conflicting address
	// (memberlist's Config.DeadNodeReclaimTime; a member that left is
	// replaceable at once). Default (and zero): DeadNodeReclaimLAN with LAN
	// timings, as Consul sets it, DeadNodeReclaimLocal otherwise.
	DeadNodeReclaimTime time.Duration
	// Resolver looks up the seeds given as DNS names (Join, KeepJoined).
	// Default (and nil): net.DefaultResolver.
	Resolver Resolver
}

// DefaultLabel is Config.Label's default.
const DefaultLabel = "phalanx"

// DefaultBindAddr is Config.BindAddr's default: every address, on
// memberlist's default port.
const DefaultBindAddr = "0.0.0.0:7946"

// Config.DeadNodeReclaimTime's defaults, with LAN and local timings.
const (
	DeadNodeReclaimLAN   = 30 * time.Second
	DeadNodeReclaimLocal = time.Second
)

// DefaultRejoinInterval is Config.RejoinInterval's default.
const DefaultRejoinInterval = 5 * time.Second

// MaxRejoinBackoff bounds the wait between failed rejoins.
const MaxRejoinBackoff = 10 * time.Second

// tweakMemberlist, when set (by tests), adjusts memberlist's configuration
// before Create.
var tweakMemberlist func(*memberlist.Config)

// Cluster is one member of the gossip cluster.
type Cluster struct {
	ml     *memberlist.Memberlist
	mc     *memberlist.Config // its Keyring is nil without encryption
	cfg    Config
	addr   string // bound gossip address, fixed at New
	listen string // listen address: BindAddr's host, the bound port

	// members mirrors memberlist's live members, maintained by its event
	// callbacks: memberlist rewrites a Node's Meta in place without a lock
	// (hashicorp/memberlist#306), so Node values must not be read outside
	// those callbacks.
	mu      sync.Mutex
	members map[string]*pb.NodeMeta
	addrs   map[string]string // live members' gossip host:port, by name

	// instance identifies this process's membership (random, fixed at
	// New): it is the payload of every ack this member sends and its
	// push/pull state. A peer whose acks carry a new instance restarted
	// under the same name and lost its member list (see KeepJoined).
	// Guarded by mu: peerInstance (last instance seen, by name) and
	// restarted (names to rejoin).
	instance     []byte
	peerInstance map[string]string
	restarted    map[string]bool
	kick         chan struct{} // signalled (never blocking) when restarted grows

	// served is the meta the delegate last gave memberlist, applied the
	// meta memberlist's own state holds for this member (copied in its
	// event callbacks); guarded by mu. They differ after an update
	// memberlist dropped (UpdateMeta).
	served, applied []byte
	// updateNode is memberlist's UpdateNode (replaced by tests).
	updateNode func(timeout time.Duration) error

	// keyMu serializes keyring changes and the key file's rewrites.
	keyMu sync.Mutex

	shutdownOnce sync.Once
	done         chan struct{} // closed by Leave

	// logw is memberlist's log output; Leave tells it the member is
	// closing (logWriter.closing).
	logw *logWriter
}

// New creates the member and binds its gossip port; it contacts no peer
// (see Join).
func New(cfg Config) (*Cluster, error) {
	if cfg.Name == "" {
		return nil, errors.New("cluster: name is required")
	}
	if cfg.Meta == nil {
		return nil, errors.New("cluster: meta is required")
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = DefaultBindAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RejoinInterval <= 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("gossip address %q: bad port", cfg.BindAddr)
	}
	mc := memberlist.DefaultLANConfig()
	if !cfg.LAN {
		// The local timings' RetransmitMult of 2 sends a broadcast 2 ×
		// ceil(log10(N+1)) times: twice in a cluster of up to 9, so one
		// gossip round (GossipNodes, 3) reached two of a 4-member
		// cluster's three peers, and the third depended on their
		// relaying, which missed about one state change in 30 (an agent
		// listed draining until the next push-pull, up to 15 s;
		// TestSmallClusterMetaReachesEveryMember). The LAN value, 4,
		// reaches every peer of a small cluster in the first round.
		lanRetransmit := mc.RetransmitMult
		mc = memberlist.DefaultLocalConfig()
		mc.RetransmitMult = lanRetransmit
	}
	mc.Name = cfg.Name
	if cfg.DeadNodeReclaimTime <= 0 {
		cfg.DeadNodeReclaimTime = DeadNodeReclaimLocal
		if cfg.LAN {
			cfg.DeadNodeReclaimTime = DeadNodeReclaimLAN
		}
	}
	mc.DeadNodeReclaimTime = cfg.DeadNodeReclaimTime
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	if cfg.Label == "" {
		cfg.Label = DefaultLabel
	}
	if len(cfg.Label) > memberlist.LabelMaxSize {
		return nil, fmt.Errorf("cluster label: %d bytes, at most %d", len(cfg.Label), memberlist.LabelMaxSize)
	}
	mc.Label = cfg.Label
	if cfg.KeyFile != "" {
		if len(cfg.Keys) > 0 {
			return nil, errors.New("cluster: keys and a key file given; give one")
		}
		kf, err := ReadKeyFile(cfg.KeyFile)
		if err != nil {
			return nil, err
		}
		if kf.Loose() {
			cfg.Logger.Warn("gossip key file is readable by group or others; chmod 600 it", "file", kf.Path, "mode", kf.Mode.String())
		}
		cfg.Keys = kf.Keys
	}
	if len(cfg.Keys) > 0 {
		for i, k := range cfg.Keys {
			if len(k) != KeySize {
				return nil, fmt.Errorf("gossip key %d: %d bytes, want %d", i+1, len(k), KeySize)
			}
		}
		keys := make([][]byte, len(cfg.Keys))
		for i, k := range cfg.Keys {
			keys[i] = bytes.Clone(k)
		}
		ring, err := memberlist.NewKeyring(keys[1:], keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip keyring: %w", err)
		}
		mc.Keyring = ring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	c := &Cluster{
		cfg: cfg, members: map[string]*pb.NodeMeta{}, addrs: map[string]string{},
		instance: make([]byte, 8), peerInstance: map[string]string{}, restarted: map[string]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	rand.Read(c.instance)
	mc.Delegate = &delegate{c: c, meta: cfg.Meta, logger: cfg.Logger}
	c.updateNode = func(timeout time.Duration) error { return c.ml.UpdateNode(timeout) }
	mc.Events = &events{c: c}
	mc.Ping = &pings{c: c}
	c.logw = newLogWriter(cfg.Logger.With("subsystem", "memberlist"), time.Now)
	mc.Logger = log.New(c.logw, "", 0)
	if tweakMemberlist != nil {
		tweakMemberlist(mc)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.BindAddr, err)
	}
	n := ml.LocalNode()
	c.ml, c.mc = ml, mc
	c.addr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	c.listen = ListenAddr(cfg.BindAddr, int(n.Port))
	return c, nil
}

// ListenAddr returns a listen address as a daemon logs it: the host as
// configured (0.0.0.0 and :: stand for every address, which net.Listener
// shows as [::]) and the port actually bound (port 0 picks one).
func ListenAddr(configured string, port int) string {
	host, _, err := net.SplitHostPort(configured)
	if err != nil {
		host = configured
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ListenAddr returns the address gossip listens on (BindAddr with the
// port bound), where Addr is the one advertised to the other members.
func (c *Cluster) ListenAddr() string { return c.listen }

// Addr returns the gossip address other members join (host:port actually
// bound and advertised).
func (c *Cluster) Addr() string { return c.addr }

// Label returns the cluster label in use (Config.Label, defaulted).
func (c *Cluster) Label() string { return c.cfg.Label }

// Join contacts the given seeds, retrying every second until at least one
// member answers or ctx ends. A seed is "[name/]host[:port]" or SRVScheme
// and a record name; a DNS name stands for every address it resolves to
// (an A/AAAA lookup, or the SRV record's targets and ports), each joined,
// and is resolved again at every retry. It returns the number of members
// contacted.
func (c *Cluster) Join(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, nil
	}
	for {
		addrs, rerr := c.resolveSeeds(ctx, seeds)
		var n int
		var err error
		if len(addrs) > 0 {
			n, err = c.ml.Join(addrs)
		}
		switch {
		case n > 0 && rerr != nil:
			c.cfg.Logger.Warn("joined cluster, but some seeds did not resolve", "joined", n, "err", flatten(rerr))
			return n, nil
		case n > 0:
			return n, nil
		case rerr != nil && err != nil:
			err = fmt.Errorf("%w; %w", flatten(rerr), flatten(err))
		case rerr != nil:
			err = flatten(rerr)
		default:
			err = flatten(err)
		}
		c.cfg.Logger.Warn("join cluster: retrying", append([]any{"addrs", seeds, "resolved", addrs, "err", err}, keyHint(fmt.Sprint(err))...)...)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("join cluster at %v: %w", seeds, err)
		case <-time.After(time.Second):
		}
	}
}

// KeepJoined keeps this member joined to seeds (as given to Join) until ctx
// ends or the member leaves. Every RejoinInterval it resolves each seed
// again and joins, with memberlist.Join, each of its addresses that is not
// a live member: so a seed which restarted (a coordinator, say) learns the
// cluster again, and a name whose addresses changed (a Kubernetes pod
// replaced behind a headless Service) is followed to its new address. An
// address's failed joins (or a seed's failed lookups) back off, doubling up
// to MaxRejoinBackoff. It also joins at once any member seen to have
// restarted under the same name before it was found dead: such a member
// answers probes but has forgotten the cluster. Call it after Join
// succeeds.
func (c *Cluster) KeepJoined(ctx context.Context, seeds []string) {
	interval := c.cfg.RejoinInterval
	maxWait := max(interval, MaxRejoinBackoff)
	type backoff struct {
		wait    time.Duration // before the next attempt, while failing
		skip    int           // ticks to let pass before it
		failing bool
	}
	// retry holds the backoff of each address joined (and each seed
	// looked up, under "lookup " and its text), pruned to those of the
	// last round.
	retry := map[string]*backoff{}
	get := func(key string) *backoff {
		b, ok := retry[key]
		if !ok {
			b = &backoff{wait: interval}
			retry[key] = b
		}
		return b
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	tick := false
	// due reports whether b's next attempt is now (counting down the
	// ticks to skip); fail records a failed attempt and logs it, at warn
	// level when b starts failing and debug after.
	due := func(b *backoff) bool {
		if b.skip > 0 {
			if tick {
				b.skip--
			}
			return false
		}
		return true
	}
	fail := func(b *backoff, msg string, args ...any) {
		level := slog.LevelDebug
		if !b.failing {
			level = slog.LevelWarn
		}
		ticks := int((b.wait + interval - 1) / interval)
		b.skip, b.failing = ticks-1, true
		c.cfg.Logger.Log(ctx, level, msg, append(args, "next_in", time.Duration(ticks)*interval)...)
		b.wait = min(2*b.wait, maxWait)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-c.kick:
			tick = false
		case <-ticker.C:
			tick = true
		}
		live, restarted := c.rejoinState()
		seen := map[string]bool{}
		for _, s := range seeds {
			lookup := "lookup " + s
			seen[lookup] = true
			lb := get(lookup)
			if !due(lb) {
				continue
			}
			addrs, err := c.resolveSeed(ctx, s)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				fail(lb, "rejoin cluster: seed does not resolve; retrying", "seed", s, "err", flatten(err))
				continue
			}
			*lb = backoff{wait: interval}
			for _, a := range addrs {
				seen[a] = true
				b := get(a)
				if addrLive(a, live) {
					*b = backoff{wait: interval}
					continue
				}
				if !due(b) {
					continue
				}
				if n, err := c.ml.Join([]string{a}); n > 0 {
					c.cfg.Logger.Info("rejoined cluster: seed was not a live member", "seed", s, "addr", a)
					*b = backoff{wait: interval}
				} else {
					fail(b, "rejoin cluster: seed is not a live member; retrying", "seed", s, "addr", a, "err", flatten(err))
				}
			}
		}
		for key := range retry {
			if !seen[key] {
				delete(retry, key)
			}
		}
		for name, addr := range restarted {
			n, err := c.ml.Join([]string{addr})
			if n > 0 {
				c.cfg.Logger.Info("rejoined member that restarted", "member", name, "addr", addr)
				continue
			}
			// Tried again next round, until it answers or is found dead.
			c.cfg.Logger.Warn("rejoin member that restarted: retrying", "member", name, "addr", addr, "err", flatten(err))
			c.mu.Lock()
			if _, ok := c.addrs[name]; ok {
				c.restarted[name] = true
			}
			c.mu.Unlock()
		}
	}
}

// rejoinState returns the live members' addresses (this member's
// included) and takes the members seen to have restarted, with their
// addresses.
func (c *Cluster) rejoinState() (live map[string]bool, restarted map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live = make(map[string]bool, len(c.addrs)+1)
	for _, a := range c.addrs {
		live[a] = true
	}
	live[c.addr] = true
	restarted = make(map[string]string, len(c.restarted))
	for name := range c.restarted {
		if a, ok := c.addrs[name]; ok {
			restarted[name] = a
		}
	}
	clear(c.restarted)
	return live, restarted
}

// flatten returns err on one line: go-multierror (memberlist.Join's
// errors) formats its errors as an indented, multi-line list, errors.Join
// (resolveSeeds') one per line.
func flatten(err error) error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok && strings.Contains(err.Error(), "\n") { // errors.Join
		var msgs []string
		for _, e := range joined.Unwrap() {
			msgs = append(msgs, flatten(e).Error())
		}
		return &flatError{msg: strings.Join(msgs, "; "), err: err}
	}
	var multi interface{ WrappedErrors() []error }
	if errors.As(err, &multi) {
		var msgs []string
		for _, e := range multi.WrappedErrors() {
			msgs = append(msgs, e.Error())
		}
		return &flatError{msg: strings.Join(msgs, "; "), err: err}
	}
	if strings.Contains(err.Error(), "\n") {
		return &flatError{msg: strings.Join(strings.Fields(err.Error()), " "), err: err}
	}
	return err
}

// flatError is an error message on one line, wrapping the original.
type flatError struct {
	msg string
	err error
}

func (e *flatError) Error() string { return e.msg }
func (e *flatError) Unwrap() error { return e.err }

// Members returns the live members' metas (this member included), sorted by
// name. Members whose meta cannot be decoded are left out.
func (c *Cluster) Members() []*pb.NodeMeta {
	c.mu.Lock()
	out := make([]*pb.NodeMeta, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, proto.Clone(m).(*pb.NodeMeta))
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// events keeps Cluster.members from memberlist's callbacks, which run
// under memberlist's lock and must not call back into it.
type events struct{ c *Cluster }

func (e *events) NotifyJoin(n *memberlist.Node)   { e.c.setMember(n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { e.c.setMember(n) }
func (e *events) NotifyLeave(n *memberlist.Node) {
	e.c.mu.Lock()
	delete(e.c.members, n.Name)
	delete(e.c.addrs, n.Name)
	delete(e.c.peerInstance, n.Name)
	delete(e.c.restarted, n.Name)
	e.c.mu.Unlock()
	if e.c.cfg.OnMember != nil {
		e.c.cfg.OnMember(n.Name, nil)
	}
}

func (c *Cluster) setMember(n *memberlist.Node) {
	addr := net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	c.mu.Lock()
	c.addrs[n.Name] = addr
	if n.Name == c.cfg.Name {
		c.applied = bytes.Clone(n.Meta)
	}
	c.mu.Unlock()
	m := &pb.NodeMeta{}
	if err := proto.Unmarshal(n.Meta, m); err != nil {
		c.cfg.Logger.Warn("bad node meta", "node", n.Name, "err", err)
		c.mu.Lock()
		delete(c.members, n.Name)
		c.mu.Unlock()
		return
	}
	if m.GetName() == "" {
		m.Name = n.Name
	}
	c.mu.Lock()
	c.members[n.Name] = m
	c.mu.Unlock()
	if c.cfg.OnMember != nil {
		c.cfg.OnMember(n.Name, m)
	}
}

// metaUpdates bounds UpdateMeta's updates for one call.
const metaUpdates = 3

// ErrMetaDropped is UpdateMeta's error when memberlist dropped each of its
// metaUpdates updates: peers still list this member's older meta.
var ErrMetaDropped = fmt.Errorf("gossip meta: memberlist dropped the update %d times (its state keeps an older meta)", metaUpdates)

// UpdateMeta gossips the member's new meta (as returned by Config.Meta) and
// waits up to timeout for its broadcast to be sent (0: until it is, as
// memberlist's UpdateNode does).
//
// memberlist's UpdateNode draws the update's incarnation number before it
// takes its node lock: a refutation of a suspicion made in between takes a
// higher one, with the old meta, and memberlist then drops the update as
// older than its own state. Nothing would gossip the new meta until the next
// one (push/pulls carry the old meta too), and peers would list this member
// in its old state. So UpdateMeta checks that memberlist's state holds the
// meta it served and, if not, updates again, up to metaUpdates times.
// Errors: memberlist's ("timeout waiting for update broadcast") once its
// state holds the meta, or ErrMetaDropped.
func (c *Cluster) UpdateMeta(timeout time.Duration) error {
	var err error
	for range metaUpdates {
		err = c.updateNode(timeout)
		c.mu.Lock()
		applied := bytes.Equal(c.served, c.applied)
		c.mu.Unlock()
		if applied {
			return err
		}
	}
	return ErrMetaDropped
}

// ErrLeaveUnconfirmed is Leave's error when no peer took the leave
// message within the timeout (memberlist's "timeout waiting for leave
// broadcast"): the peers are shutting down too, or unreachable. Nothing is
// lost: a peer still running marks this member failed once its probes go
// unanswered instead of seeing it leave.
var ErrLeaveUnconfirmed = errors.New("leave cluster: no peer took the leave message in time (peers shutting down too, or unreachable); a peer still running will mark this member failed instead")

// Leave announces departure and waits up to timeout, then shuts down. It is
// idempotent. A leave no peer took in time is ErrLeaveUnconfirmed.
func (c *Cluster) Leave(timeout time.Duration) error {
	var err error
	c.shutdownOnce.Do(func() {
		close(c.done)
		c.logw.closing.Store(true)
		if lerr := c.ml.Leave(timeout); lerr != nil {
			err = fmt.Errorf("leave cluster: %w", lerr)
			if lerr.Error() == "timeout waiting for leave broadcast" { // memberlist.go, Leave: its only timeout
				err = ErrLeaveUnconfirmed
			}
		}
		if serr := c.ml.Shutdown(); serr != nil && err == nil {
			err = fmt.Errorf("shutdown gossip: %w", serr)
		}
	})
	return err
}

// pings puts this member's instance in its acks and notes peers' instances
// from theirs. Its methods run on memberlist's goroutines and must not
// block or call back into memberlist.
type pings struct{ c *Cluster }

func (p *pings) AckPayload() []byte { return p.c.instance }

func (p *pings) NotifyPingComplete(other *memberlist.Node, _ time.Duration, payload []byte) {
	// Name never changes; other fields may, unlocked (memberlist#306).
	p.c.noteInstance(other.Name, payload, true)
}

// noteInstance records the instance of member name, from an ack (probe) or
// a push/pull. A new instance in an ack means the member restarted, and
// KeepJoined is told to join it; a push/pull has just done that.
func (c *Cluster) noteInstance(name string, instance []byte, probe bool) {
	if len(instance) == 0 || name == c.cfg.Name {
		return // a member that sends no instance
	}
	c.mu.Lock()
	prev, known := c.peerInstance[name]
	c.peerInstance[name] = string(instance) // forgotten when name leaves or dies
	_, live := c.addrs[name]
	restarted := probe && live && known && prev != string(instance)
	if restarted {
		c.restarted[name] = true
	}
	c.mu.Unlock()
	if restarted {
		c.cfg.Logger.Info("member restarted: rejoining it", "member", name)
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// delegate serves the node meta to memberlist, and exchanges members'
// instances in push/pulls (joins included), so that a member's restart is
// noticed from the first probe after it was met.
type delegate struct {
	c      *Cluster
	meta   func() *pb.NodeMeta
	logger *slog.Logger
}

func (d *delegate) NodeMeta(limit int) []byte {
	b, err := proto.Marshal(d.meta())
	if err != nil || len(b) > limit {
		d.logger.Error("node meta too large or unencodable", "bytes", len(b), "limit", limit, "err", err)
		b = nil
	}
	d.c.mu.Lock()
	d.c.served = bytes.Clone(b)
	d.c.mu.Unlock()
	return b
}
func (d *delegate) NotifyMsg([]byte)                {}
func (d *delegate) GetBroadcasts(int, int) [][]byte { return nil }

// stateVersion tags the push/pull state: stateVersion, the 8-byte
// instance, the member's name.
const stateVersion = 1

func (d *delegate) LocalState(bool) []byte {
	return append(append([]byte{stateVersion}, d.c.instance...), d.c.cfg.Name...)
}

func (d *delegate) MergeRemoteState(b []byte, _ bool) {
	if len(b) < 1+len(d.c.instance) || b[0] != stateVersion {
		return
	}
	n := 1 + len(d.c.instance)
	d.c.noteInstance(string(b[n:]), b[1:n], false)
}

// logRepeatEvery is how often logWriter lets through a line it has
// already logged (the same text from any peer); the lines in between are
// counted, and the next one says how many were suppressed. memberlist logs
// one line per rejected packet: a stranger or a member with a stale key
// would otherwise write one every second, forever.
const logRepeatEvery = 30 * time.Second

// gossipKeyHints are added to memberlist's lines (and join errors) that
// mean two members do not share a gossip key, by memberlist's own wording
// (net.go and security.go of hashicorp/memberlist), matched without case:
// a member without a key and an encrypting peer, the reverse, or two keys
// that differ. Each says which side lacks what.
var gossipKeyHints = []struct{ match, hint string }{
	{"remote state is encrypted and encryption is not configured",
		"gossip key missing here: the peer encrypts gossip and this member has no key " +
			"(give it --gossip-key-file with the cluster's key file)"},
	{"encryption is configured but remote state is not encrypted",
		"gossip key missing on the peer: this member encrypts gossip and the peer has no key " +
			"(start the peer with --gossip-key-file, the cluster's key file)"},
	{"no installed keys could decrypt",
		"gossip key mismatch: this member and the peer share no key " +
			"(check --gossip-key-file on both; coordctl keyring list shows each member's keys)"},
	{"with unacceptable label",
		"cluster label mismatch: the peer's --cluster-label differs from this member's " +
			"(members with different labels never merge; give every member the same label)"},
}

// joinEOFHint is the hint for a join whose peer closed the stream without
// a word (memberlist's "failed to join ADDR: EOF"): what a peer with another
// cluster label does (it only logs "discarding stream with unacceptable
// label"), and what a peer that is no gossip port may do.
const joinEOFHint = "the peer closed the connection without answering: it may have another " +
	"--cluster-label (its log then says \"unacceptable label\"; every member needs the same one), " +
	"or the address is not a gossip port"

// keyHint returns the attributes ("hint", ...) of gossipKeyHints for a
// memberlist message that means a gossip key or cluster label mismatch
// (joinEOFHint for a join the peer closed without a word), else none.
func keyHint(msg string) []any {
	msg = strings.ToLower(msg)
	for _, h := range gossipKeyHints {
		if strings.Contains(msg, h.match) {
			return []any{"hint", h.hint}
		}
	}
	if strings.Contains(msg, "failed to join") && strings.HasSuffix(msg, ": eof") {
		return []any{"hint", joinEOFHint}
	}
	return nil
}

// logWriter turns memberlist's "[LEVEL] memberlist: msg" lines into slog
// records at that level: the peer memberlist appends as "from=ADDR" (or
// "addr=ADDR") becomes a peer attribute, key mismatches get a hint, and a
// line whose text (peer aside) was logged less than logRepeatEvery ago is
// counted instead of logged. Safe for concurrent use.
type logWriter struct {
	l   *slog.Logger
	now func() time.Time

	// closing is set when the member leaves: from then on, memberlist's
	// warnings and errors are logged at DEBUG, so that a clean stop logs no
	// ERROR. They are the stop's own doing: a gossip or probe still
	// sending while Shutdown closes the sockets ("use of closed network
	// connection"), or a push/pull or probe with a peer that stops at the
	// same time (every daemon of a host sent SIGTERM at once). A leave that
	// fails is Leave's error, which the daemon logs.
	closing atomic.Bool

	mu   sync.Mutex
	seen map[string]*logRepeat
}

type logRepeat struct {
	last       time.Time
	suppressed int
}

func newLogWriter(l *slog.Logger, now func() time.Time) *logWriter {
	return &logWriter{l: l, now: now, seen: map[string]*logRepeat{}}
}

func (w *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelDebug, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if strings.HasPrefix(line, prefix) {
			level = lv
			line = strings.TrimSpace(line[len(prefix):])
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	var attrs []any
	for _, key := range []string{" from=", " addr="} {
		if i := strings.LastIndex(line, key); i >= 0 && !strings.Contains(line[i+len(key):], " ") {
			attrs = append(attrs, "peer", line[i+len(key):])
			line = strings.TrimSuffix(strings.TrimSpace(line[:i]), ":") // "...label \"x\": from=ADDR"
			break
		}
	}
	attrs = append(attrs, keyHint(line)...)
	if level >= slog.LevelWarn && w.closing.Load() {
		level = slog.LevelDebug
	}
	if level >= slog.LevelWarn {
		w.mu.Lock()
		r, ok := w.seen[line]
		now := w.now()
		if ok && now.Sub(r.last) < logRepeatEvery {
			r.suppressed++
			w.mu.Unlock()
			return len(p), nil
		}
		if !ok {
			if len(w.seen) >= 256 { // texts that embed changing details: start over rather than grow
				clear(w.seen)
			}
			r = &logRepeat{}
			w.seen[line] = r
		}
		if r.suppressed > 0 {
			attrs = append(attrs, "repeats_suppressed", r.suppressed, "over", now.Sub(r.last).Round(time.Second))
		}
		r.last, r.suppressed = now, 0
		w.mu.Unlock()
	}
	w.l.Log(context.Background(), level, line, attrs...)
	return len(p), nil
}

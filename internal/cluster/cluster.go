package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
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
	// port. Default "0.0.0.0:7946" (memberlist's default port).
	BindAddr string
	// Meta returns the member's current meta; it is called by memberlist
	// whenever it gossips this node and must not block. Required.
	Meta func() *pb.NodeMeta
	// LAN selects memberlist.DefaultLANConfig timings; false selects
	// DefaultLocalConfig (faster failure detection, for one host and tests).
	LAN bool
	// Logger receives memberlist's log lines at their level. Default
	// slog.Default().
	Logger *slog.Logger
}

// Cluster is one member of the gossip cluster.
type Cluster struct {
	ml   *memberlist.Memberlist
	cfg  Config
	addr string // bound gossip address, fixed at New

	// members mirrors memberlist's live members, maintained by its event
	// callbacks: memberlist rewrites a Node's Meta in place without a lock
	// (hashicorp/memberlist#306), so Node values must not be read outside
	// those callbacks.
	mu      sync.Mutex
	members map[string]*pb.NodeMeta

	shutdownOnce sync.Once
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
		cfg.BindAddr = "0.0.0.0:7946"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("gossip address %q: bad port", cfg.BindAddr)
	}
	mc := memberlist.DefaultLocalConfig()
	if cfg.LAN {
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = cfg.Name
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	c := &Cluster{cfg: cfg, members: map[string]*pb.NodeMeta{}}
	mc.Delegate = &delegate{meta: cfg.Meta, logger: cfg.Logger}
	mc.Events = &events{c: c}
	mc.Logger = log.New(&logWriter{l: cfg.Logger.With("component", "memberlist")}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.BindAddr, err)
	}
	n := ml.LocalNode()
	c.ml = ml
	c.addr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	return c, nil
}

// Addr returns the gossip address other members join (host:port actually
// bound and advertised).
func (c *Cluster) Addr() string { return c.addr }

// Join contacts the given members, retrying every second until at least one
// answers or ctx ends. It returns the number of members contacted.
func (c *Cluster) Join(ctx context.Context, addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	for {
		n, err := c.ml.Join(addrs)
		if n > 0 {
			return n, nil
		}
		c.cfg.Logger.Warn("join cluster: retrying", "addrs", addrs, "err", err)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("join cluster at %v: %w", addrs, err)
		case <-time.After(time.Second):
		}
	}
}

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
	e.c.mu.Unlock()
}

func (c *Cluster) setMember(n *memberlist.Node) {
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
}

// UpdateMeta gossips the member's new meta (as returned by Config.Meta).
func (c *Cluster) UpdateMeta(timeout time.Duration) error {
	return c.ml.UpdateNode(timeout)
}

// Leave announces departure and waits up to timeout, then shuts down. It is
// idempotent.
func (c *Cluster) Leave(timeout time.Duration) error {
	var err error
	c.shutdownOnce.Do(func() {
		if lerr := c.ml.Leave(timeout); lerr != nil {
			err = fmt.Errorf("leave cluster: %w", lerr)
		}
		if serr := c.ml.Shutdown(); serr != nil && err == nil {
			err = fmt.Errorf("shutdown gossip: %w", serr)
		}
	})
	return err
}

// delegate serves the node meta to memberlist.
type delegate struct {
	meta   func() *pb.NodeMeta
	logger *slog.Logger
}

func (d *delegate) NodeMeta(limit int) []byte {
	b, err := proto.Marshal(d.meta())
	if err != nil || len(b) > limit {
		d.logger.Error("node meta too large or unencodable", "bytes", len(b), "limit", limit, "err", err)
		return nil
	}
	return b
}
func (d *delegate) NotifyMsg([]byte)                {}
func (d *delegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *delegate) LocalState(bool) []byte          { return nil }
func (d *delegate) MergeRemoteState([]byte, bool)   {}

// logWriter turns memberlist's "[LEVEL] memberlist: msg" lines into slog
// records at that level.
type logWriter struct{ l *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelDebug, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = lv
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.l.Log(context.Background(), level, string(line))
	return len(p), nil
}

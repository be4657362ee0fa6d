package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/security"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Cluster is a coordinator and its agents running in this process.
type Cluster struct {
	Coordinator *coordinator.Coordinator
	Agents      []*agent.Agent

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// Start starts a coordinator and n agents on 127.0.0.1 with ephemeral ports,
// each agent using cpusPerAgent CPUs (0: all), and waits up to 10 s until
// the coordinator sees every agent. Close stops them all.
func Start(ctx context.Context, n, cpusPerAgent int, logger *slog.Logger) (*Cluster, error) {
	return StartWith(ctx, Options{Agents: n, CPUsPerAgent: cpusPerAgent, Logger: logger})
}

// Options configures StartWith.
type Options struct {
	// Agents is the number of agents.
	Agents int
	// CPUsPerAgent is each agent's worker count (0: all CPUs).
	CPUsPerAgent int
	// ClockShift shifts agent i's wall clock by ClockShift[i] (missing or
	// zero: the real clock), to show that results do not depend on agents'
	// clocks agreeing.
	ClockShift []time.Duration
	// Logger receives every member's logs. Default slog.Default().
	Logger *slog.Logger
	// GossipKeys, when set, encrypt the cluster's gossip: each member gets
	// its own key file KeyDir/NAME.keys holding them (the first primary),
	// which keyring changes rewrite. Default (and empty): plaintext gossip.
	GossipKeys [][]byte
	// KeyDir is the directory of the members' key files; required with
	// GossipKeys.
	KeyDir string
	// CoordinatorSecurity and AgentSecurity are the coordinator's and
	// every agent's hop credentials. Default (zero): insecure, as loopback
	// allows.
	CoordinatorSecurity, AgentSecurity security.Config
	// DataDir is the coordinator's run store directory
	// (coordinator.Config.DataDir). Default (and empty): no run store.
	DataDir string
	// Agent, when not nil, edits agent i's configuration (0-based; its
	// allowlist, caps) before it starts.
	Agent func(i int, cfg *agent.Config)
	// Coordinator, when not nil, edits the coordinator's configuration
	// (its metrics address, say) before it starts.
	Coordinator func(cfg *coordinator.Config)
}

// KeyFile returns the key file of the member named name, as StartWith
// names it: dir/NAME.keys.
func KeyFile(dir, name string) string { return filepath.Join(dir, name+".keys") }

// keyFile writes o.GossipKeys to name's key file and returns its path; ""
// without GossipKeys.
func (o Options) keyFile(name string) (string, error) {
	if len(o.GossipKeys) == 0 {
		return "", nil
	}
	if o.KeyDir == "" {
		return "", errors.New("localcluster: GossipKeys without KeyDir")
	}
	p := KeyFile(o.KeyDir, name)
	return p, cluster.WriteKeyFile(p, o.GossipKeys)
}

// StartWith starts a cluster as Start does, with options.
func StartWith(ctx context.Context, o Options) (*Cluster, error) {
	n, cpusPerAgent, logger := o.Agents, o.CPUsPerAgent, o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	coordKeys, err := o.keyFile("coordinator")
	if err != nil {
		return nil, err
	}
	ccfg := coordinator.Config{
		Name: "coordinator", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Logger: logger,
		GossipKeyFile: coordKeys, Security: o.CoordinatorSecurity, DataDir: o.DataDir,
	}
	if o.Coordinator != nil {
		o.Coordinator(&ccfg)
	}
	coord, err := coordinator.New(ccfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &Cluster{Coordinator: coord, cancel: cancel}
	c.spawn(func() error { return coord.Run(runCtx) })
	for i := range n {
		name := fmt.Sprintf("agent-%d", i+1)
		keys, err := o.keyFile(name)
		if err != nil {
			c.Close()
			return nil, err
		}
		cfg := agent.Config{
			Name: name, GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
			Join: []string{coord.GossipAddr()}, CPUs: cpusPerAgent, Logger: logger,
			GossipKeyFile: keys, Security: o.AgentSecurity, SharedProcess: true,
		}
		if i < len(o.ClockShift) && o.ClockShift[i] != 0 {
			shift := o.ClockShift[i]
			cfg.Clock = func() time.Time { return time.Now().Add(shift) }
		}
		if o.Agent != nil {
			o.Agent(i, &cfg)
		}
		a, err := agent.New(cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Agents = append(c.Agents, a)
		c.spawn(func() error { return a.Run(runCtx) })
	}
	if err := c.WaitAgents(ctx, n, 10*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) spawn(f func() error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}
	}()
}

// WaitAgents waits until the coordinator sees n idle agents.
func (c *Cluster) WaitAgents(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		idle := 0
		for _, m := range c.Coordinator.Agents() {
			if m.GetState() == pb.AgentState_AGENT_STATE_IDLE {
				idle++
			}
		}
		if idle >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("coordinator sees %d idle agents after %v, want %d", idle, timeout, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops every member and waits for them; it returns their errors.
func (c *Cluster) Close() error {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/engine"
	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/version"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// ClockShiftEnv names a test-only environment variable: a Go duration added
// to the agent's wall clock (e.g. "200s"), to prove that results do not
// depend on agents' clocks agreeing.
const ClockShiftEnv = "PHALANX_TEST_CLOCK_SHIFT"

// MaxStartAhead bounds how far from the agent's clock a Start instant may
// be, ahead or behind: the coordinator sends one about 100 ms ahead.
const MaxStartAhead = time.Minute

// DefaultGRPCAddr is the agent's default gRPC listen address.
const DefaultGRPCAddr = "127.0.0.1:7070"

// Config configures an agent. DefaultConfig returns one with every default
// filled in; New fills in any field left at its zero value the same way, so
// a literal Config works too (except LAN, whose zero is local timings).
type Config struct {
	// Name is the agent's unique cluster name. Default (and zero): the host
	// name plus the bound gRPC port, derived by New.
	Name string
	// GRPCAddr is the gRPC listen address, host:port; port 0 picks a free
	// port. Default DefaultGRPCAddr ("127.0.0.1:7070"); zero means the
	// default.
	GRPCAddr string
	// AdvertiseAddr is the gRPC address (host:port) put in the node meta,
	// for when GRPCAddr's host is unspecified (0.0.0.0). Default (and
	// zero): GRPCAddr as bound, with an unspecified host replaced by the
	// gossip address's host.
	AdvertiseAddr string
	// GossipAddr is the memberlist bind address, host:port (TCP and UDP);
	// port 0 picks a free port. Default cluster.DefaultBindAddr
	// ("0.0.0.0:7946"); zero means the default.
	GossipAddr string
	// Join lists the members to join: gossip addresses (host:port), DNS
	// names standing for every address they resolve to, or
	// cluster.SRVScheme SRV records (cluster.Cluster.Join). The agent
	// retries until one answers; afterwards, every RejoinInterval, it
	// resolves them again and rejoins any address that is not a live
	// member (a restarted coordinator, a replaced pod). Default (and zero):
	// none, the agent waits to be joined.
	Join []string
	// RejoinInterval is how often the agent checks that the Join members
	// are live and rejoins those that are not; failed rejoins back off up
	// to cluster.MaxRejoinBackoff. Default cluster.DefaultRejoinInterval
	// (5 s); zero or negative means the default.
	RejoinInterval time.Duration
	// GossipKeyFile names the gossip key file (cluster.ReadKeyFile's
	// format: base64 AES-256 keys, one per line, the first primary). Gossip
	// is then encrypted and authenticated with its keys, no plaintext
	// member can join, and the file is rewritten after each keyring change
	// (coordctl keyring). Default (and zero): none, plaintext gossip.
	GossipKeyFile string
	// ClusterLabel is the cluster label: members with another label never
	// merge with this one (cluster.Config.Label, at most 255 bytes).
	// Default cluster.DefaultLabel ("phalanx"); zero means the default.
	ClusterLabel string
	// CPUs is the number of CPUs the engine may use: one worker per CPU.
	// Default runtime.GOMAXPROCS(0); zero or negative means the default.
	CPUs int
	// SharedProcess says the agent shares its process with others (agents,
	// a coordinator, a target: localcluster): its Intervals then carry no
	// run-queue delay (cpu_wait 0), which would be the whole process's, not
	// its own. False (the default) for an agent process of its own.
	SharedProcess bool
	// CPUList names the CPUs the process is pinned to (taskset -c syntax),
	// for the report. Default (and zero): empty, not pinned.
	CPUList string
	// LAN selects memberlist's LAN timings. Default true; false (the zero
	// value) selects its local timings (faster failure detection, for one
	// host and tests).
	LAN bool
	// Clock is the agent's wall clock. Default (and nil): ClockFromEnv,
	// time.Now shifted by $PHALANX_TEST_CLOCK_SHIFT when set.
	Clock func() time.Time
	// Security sets the credentials of the agent's gRPC server (for the
	// coordinator): mutual TLS accepting only the coordinator's role, or
	// insecure. Default (and zero): insecure, which New refuses when
	// GRPCAddr or GossipAddr is not loopback, as it refuses a GossipAddr
	// that is not loopback without GossipKeyFile, unless
	// Security.InsecureCluster (then the agent warns at start and at every
	// share).
	Security security.Config
	// AllowTargets is the target allowlist (internal/allow): a share whose
	// target, resolved, is outside it is refused at prepare with
	// PermissionDenied, before any packet is sent to the target. Default
	// (and nil): allow.Default(), loopback only (127.0.0.0/8, ::1).
	AllowTargets *allow.List
	// MaxConnections caps the connections one share may open on this agent
	// (its part of the plan's connections, of an open-loop plan's
	// max_connections and of every closed-loop stage target): a share
	// above it is refused with PermissionDenied, never clipped. Default
	// (and zero or negative): no cap.
	MaxConnections int
	// MaxRate caps one share's open-loop rate, requests/s (its part of the
	// plan's rate and of every stage target): a share above it, or a
	// closed-loop share (whose rate has no bound), is refused with
	// PermissionDenied, never clipped. Default (and zero or negative): no
	// cap.
	MaxRate int64
	// MetricsAddr is the listen address (host:port) of the Prometheus
	// /metrics endpoint (internal/metrics; README "Prometheus metrics"):
	// with mutual TLS in Security it is HTTPS and takes only client
	// certificates of the cluster's CA; without, plain HTTP, which New
	// refuses on an address that is not loopback unless
	// Security.InsecureCluster (security.Config.CheckMetrics). Port 0 picks
	// a free port. Default (and zero): none, no metrics.
	MetricsAddr string
	// MetricsRuns is how many shares keep their series on /metrics (the
	// last ones started). Default metrics.DefaultKeep (10); zero or
	// negative means the default.
	MetricsRuns int
	// Logger is the agent's logger. Default (and nil): slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the agent's defaults, the ones its flags show:
// gRPC on DefaultGRPCAddr, gossip on cluster.DefaultBindAddr with LAN
// timings, no gossip key, label cluster.DefaultLabel, rejoin every
// cluster.DefaultRejoinInterval, one worker per CPU of
// runtime.GOMAXPROCS(0), insecure gRPC, targets on loopback only
// (allow.Default), no caps, slog.Default(). Name, Clock and AdvertiseAddr
// are left empty (New derives them).
func DefaultConfig() Config {
	return Config{
		AllowTargets:   allow.Default(),
		GRPCAddr:       DefaultGRPCAddr,
		GossipAddr:     cluster.DefaultBindAddr,
		ClusterLabel:   cluster.DefaultLabel,
		RejoinInterval: cluster.DefaultRejoinInterval,
		CPUs:           runtime.GOMAXPROCS(0),
		LAN:            true,
		Logger:         slog.Default(),
	}
}

// Agent is a running agent daemon.
type Agent struct {
	cfg     Config
	lis     net.Listener
	grpc    *grpc.Server
	cluster *cluster.Cluster
	log     *slog.Logger

	// insecureWarning is logged at start and at every share when the agent
	// runs without mutual TLS on a network address (--insecure-cluster).
	insecureWarning string

	// provenance describes the host and build (CollectProvenance, once in
	// New); every Ready carries it.
	provenance *pb.Provenance

	mu        sync.Mutex // guards state, runID and runCancel
	state     pb.AgentState
	runID     string
	runCancel context.CancelFunc // ends the share in progress

	// gossipState is signalled (never blocking) when state changes; a
	// goroutine of Run pushes the new meta, since memberlist's UpdateNode
	// blocks until the broadcast goes out and must stay off the run path.
	gossipState chan struct{}

	// lookupHost, when not nil, resolves target names instead of DNS
	// (engine.Config.LookupHost; tests).
	lookupHost func(ctx context.Context, host string) ([]string, error)

	// watchers owns the Run streams' watchers (runShare), which end with
	// their stream; Run joins them once the gRPC server has stopped.
	watchers sync.WaitGroup

	metrics    *metrics.Daemon // nil without MetricsAddr
	metricsSrv *metrics.Server
	stateGauge *prometheus.GaugeVec
}

// service implements the Agent gRPC service for an Agent.
type service struct {
	pb.UnimplementedAgentServiceServer
	a *Agent
}

var _ pb.AgentServiceServer = (*service)(nil)

// New validates cfg and binds the gRPC and gossip ports; it contacts no
// peer.
func New(cfg Config) (*Agent, error) {
	def := DefaultConfig()
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = def.GRPCAddr
	}
	if cfg.GossipAddr == "" {
		cfg.GossipAddr = def.GossipAddr
	}
	if cfg.RejoinInterval <= 0 {
		cfg.RejoinInterval = def.RejoinInterval
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = def.CPUs
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
	}
	if cfg.AllowTargets == nil {
		cfg.AllowTargets = def.AllowTargets
	}
	cfg.MaxConnections = max(cfg.MaxConnections, 0)
	cfg.MaxRate = max(cfg.MaxRate, 0)
	if cfg.Clock == nil {
		clock, err := ClockFromEnv()
		if err != nil {
			return nil, err
		}
		cfg.Clock = clock
	}
	// The safe default, before anything is bound.
	insecureWarning, err := cfg.Security.CheckDaemon(cfg.GRPCAddr, cfg.GossipAddr, cfg.GossipAddr == def.GossipAddr, cfg.GossipKeyFile != "")
	if err != nil {
		return nil, err
	}
	if cfg.MetricsAddr != "" {
		if _, err := cfg.Security.CheckMetrics(cfg.MetricsAddr); err != nil {
			return nil, err
		}
	}
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen grpc on %s: %w", cfg.GRPCAddr, err)
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", host, lis.Addr().(*net.TCPAddr).Port)
	}
	a := &Agent{cfg: cfg, lis: lis, state: pb.AgentState_AGENT_STATE_IDLE, gossipState: make(chan struct{}, 1), insecureWarning: insecureWarning,
		provenance: CollectProvenance()}
	a.log = cfg.Logger.With("component", "agent", "agent", cfg.Name)
	serverOpts, err := cfg.Security.ServerOptions(a.log)
	if err != nil {
		lis.Close()
		return nil, err
	}
	a.cluster, err = cluster.New(cluster.Config{
		Name: cfg.Name, BindAddr: cfg.GossipAddr, Meta: a.meta, LAN: cfg.LAN, Logger: a.log,
		RejoinInterval: cfg.RejoinInterval, KeyFile: cfg.GossipKeyFile, Label: cfg.ClusterLabel,
	})
	if err != nil {
		lis.Close()
		return nil, err
	}
	if a.cfg.AdvertiseAddr == "" {
		a.mu.Lock()
		a.cfg.AdvertiseAddr = advertise(lis.Addr().(*net.TCPAddr), a.cluster.Addr())
		a.mu.Unlock()
		// memberlist took the meta at Create, before the address was known.
		if err := a.cluster.UpdateMeta(time.Second); err != nil {
			_ = a.cluster.Leave(0) // the error returned says why
			lis.Close()
			return nil, fmt.Errorf("advertise grpc address: %w", err)
		}
	}
	if err := a.setupMetrics(); err != nil {
		_ = a.cluster.Leave(0) // the error returned says why
		lis.Close()
		return nil, err
	}
	a.grpc = grpc.NewServer(append(serverOpts,
		// Ping the coordinator every second; a coordinator that does not
		// answer within two seconds is gone, which ends the Run stream and
		// stops the load (invariant 7). (A coordinator that dies on a live
		// host closes the stream at once.)
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Second, Timeout: 2 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)...)
	pb.RegisterAgentServiceServer(a.grpc, &service{a: a})
	return a, nil
}

// ClockFromEnv returns time.Now shifted by $PHALANX_TEST_CLOCK_SHIFT.
func ClockFromEnv() (func() time.Time, error) {
	v := os.Getenv(ClockShiftEnv)
	if v == "" {
		return time.Now, nil
	}
	shift, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", ClockShiftEnv, v, err)
	}
	return func() time.Time { return time.Now().Add(shift) }, nil
}

func advertise(bound *net.TCPAddr, gossip string) string {
	if !bound.IP.IsUnspecified() {
		return bound.String()
	}
	host, _, _ := net.SplitHostPort(gossip)
	return net.JoinHostPort(host, fmt.Sprint(bound.Port))
}

// GRPCAddr returns the advertised gRPC address.
func (a *Agent) GRPCAddr() string { return a.cfg.AdvertiseAddr }

// GossipAddr returns the bound gossip address.
func (a *Agent) GossipAddr() string { return a.cluster.Addr() }

// Name returns the agent's cluster name.
func (a *Agent) Name() string { return a.cfg.Name }

// metaAllowSlack is what the allowlist's two fields add to the meta
// besides the list's bytes: two tags, a length of up to two bytes and a
// count of up to five.
const metaAllowSlack = 1 + 2 + 1 + 5

func (a *Agent) meta() *pb.NodeMeta {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := &pb.NodeMeta{
		Role: pb.Role_ROLE_AGENT, Name: a.cfg.Name, GrpcAddr: a.cfg.AdvertiseAddr,
		Cpus: int32(a.cfg.CPUs), CpuList: a.cfg.CPUList, Version: version.Version, State: a.state,
		MaxConnections: int64(a.cfg.MaxConnections), MaxRate: a.cfg.MaxRate,
		GrpcSecurity: wire.SecurityToProto(a.cfg.Security.Mode),
	}
	// The allowlist takes what memberlist's meta limit leaves, cut at an
	// entry boundary; coordctl agents says how many entries it left off.
	list, omitted := a.cfg.AllowTargets.Compact(memberlist.MetaMaxSize - proto.Size(m) - metaAllowSlack)
	m.AllowTargets, m.AllowTargetsOmitted = list, int32(omitted)
	return m
}

// Run joins the cluster, serves gRPC until ctx ends, then leaves the
// cluster and stops the server (ending any share in progress).
func (a *Agent) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := a.grpc.Serve(a.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve grpc: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if _, err := a.cluster.Join(ctx, a.cfg.Join); err != nil && ctx.Err() == nil {
			return err
		}
		if len(a.cfg.Join) > 0 && ctx.Err() == nil {
			a.log.Info("joined cluster", "via", a.cfg.Join)
		}
		a.cluster.KeepJoined(ctx, a.cfg.Join)
		return nil
	})
	g.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-a.gossipState:
				// A timeout is routine in a large cluster (the
				// broadcast's retransmissions outlast it); a dropped
				// update leaves peers listing the old state.
				if err := a.cluster.UpdateMeta(time.Second); errors.Is(err, cluster.ErrMetaDropped) {
					a.log.Warn("gossip state", "err", err)
				} else if err != nil {
					a.log.Debug("gossip state", "err", err)
				}
			}
		}
	})
	if a.metricsSrv != nil {
		g.Go(func() error { return a.metricsSrv.Run(ctx) })
	}
	g.Go(func() error {
		<-ctx.Done()
		a.mu.Lock()
		if a.runCancel != nil {
			a.runCancel() // stop load first: shutdown must not wait for a share
		}
		a.mu.Unlock()
		if err := a.cluster.Leave(time.Second); errors.Is(err, cluster.ErrLeaveUnconfirmed) {
			a.log.Info("leave", "err", err) // the whole cluster stopping at once
		} else if err != nil {
			a.log.Warn("leave", "err", err)
		} else {
			a.log.Info("left the cluster") // its members were told: none waits for it to time out
		}
		stopGRPC(a.grpc, 2*time.Second)
		a.watchers.Wait() // every stream has ended with the server
		return nil
	})
	started := []any{"grpc_listen", cluster.ListenAddr(a.cfg.GRPCAddr, a.lis.Addr().(*net.TCPAddr).Port), "grpc_advertise", a.GRPCAddr(),
		"gossip_listen", a.cluster.ListenAddr(), "gossip_advertise", a.GossipAddr(), "workers", a.cfg.CPUs,
		"allow_targets", a.cfg.AllowTargets.String()}
	if a.cfg.MaxConnections > 0 {
		started = append(started, "max_connections", a.cfg.MaxConnections)
	}
	if a.cfg.MaxRate > 0 {
		started = append(started, "max_rate", a.cfg.MaxRate)
	}
	if a.cfg.CPUList != "" {
		started = append(started, "cpu_list", a.cfg.CPUList)
	}
	// Real-time waits keep agents that share busy cores within about a
	// millisecond of the start instant (engine.RealtimeWaits).
	started = append(started, "realtime_start", engine.RealtimeWaits())
	started = append(started, a.cfg.Security.LogAttrs(a.cfg.GossipKeyFile != "")...)
	started = append(started, "gossip_keys", len(a.cluster.Keys()), "cluster_label", a.cluster.Label())
	if a.metricsSrv != nil {
		started = append(started, "metrics_listen", a.metricsSrv.Addr(), "metrics_tls", a.metricsSrv.TLS())
	}
	a.log.Info("agent started", started...)
	if a.insecureWarning != "" {
		a.log.Warn(a.insecureWarning)
	}
	err := g.Wait()
	if err != nil {
		a.log.Error("agent stopped", "err", err)
	} else {
		a.log.Info("agent stopped")
	}
	return err
}

// stopGRPC stops gracefully, forcing after d. It returns once every
// handler has returned (GracefulStop returns then, also after Stop).
func stopGRPC(s *grpc.Server, d time.Duration) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		s.Stop()
		<-done
	}
}

// Clock implements pb.AgentServiceServer.
// Keyring applies a gossip keyring operation to this agent only
// (cluster.Cluster.Keyring); the coordinator fans it out.
func (s *service) Keyring(_ context.Context, req *pb.AgentServiceKeyringRequest) (*pb.AgentServiceKeyringResponse, error) {
	keys, err := s.a.cluster.Keyring(req.GetOp(), req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.AgentServiceKeyringResponse{Keys: keys}, nil
}

func (s *service) Clock(context.Context, *pb.ClockRequest) (*pb.ClockResponse, error) {
	return &pb.ClockResponse{NowUnixNano: s.a.cfg.Clock().UnixNano()}, nil
}

func (a *Agent) setState(s pb.AgentState) {
	a.mu.Lock()
	a.state = s
	a.noteState(s)
	a.mu.Unlock()
	select {
	case a.gossipState <- struct{}{}:
	default: // an update is already pending; it will carry this state
	}
}

// acquire claims the agent for a run; it fails when another run holds it.
func (a *Agent) acquire(runID string, cancel context.CancelFunc) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runID != "" {
		return status.Errorf(codes.FailedPrecondition, "agent %s is busy with run %s", a.cfg.Name, a.runID)
	}
	a.runID, a.runCancel = runID, cancel
	return nil
}

func (a *Agent) release() {
	a.mu.Lock()
	a.runID, a.runCancel = "", nil
	a.mu.Unlock()
	a.setState(pb.AgentState_AGENT_STATE_IDLE)
}

// Run implements pb.AgentServiceServer: one share, start to end.
func (s *service) Run(stream pb.AgentService_RunServer) error {
	return s.a.runShare(stream)
}

// runShare runs one share over its Run stream.
func (a *Agent) runShare(stream pb.AgentService_RunServer) (err error) {
	ctx, cancelShare := context.WithCancel(stream.Context())
	defer cancelShare()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	setup := first.GetSetup()
	if setup == nil {
		return status.Error(codes.InvalidArgument, "run stream: first message must be setup")
	}
	share, err := a.decodeShare(setup)
	if err != nil {
		a.log.Warn("malformed share refused", "err", err)
		return err
	}
	if err := a.acquire(share.RunID, cancelShare); err != nil {
		return err
	}
	defer a.release()
	mrun := a.metrics.StartRun(metrics.RunLabels{ID: share.RunID}, []string{a.cfg.Name})
	var lostStream, stoppedEarly bool
	defer func() {
		if lostStream {
			a.metrics.StreamError()
		}
		a.metrics.EndRun(mrun, shareResult(err, lostStream, stoppedEarly))
	}()
	log := a.log.With("run_id", share.RunID)
	if a.insecureWarning != "" {
		log.Warn(a.insecureWarning)
	}

	a.setState(pb.AgentState_AGENT_STATE_PREPARING)
	eng, err := a.newEngine(ctx, share, log)
	if err != nil {
		return err
	}
	defer eng.Close()
	// Nothing has gone to the target yet: the coordinator sends Connect
	// once every agent of the run has accepted its share.
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Accepted{Accepted: &pb.Accepted{DialAddr: eng.Addr()}}}); err != nil {
		return err
	}
	msg, err := stream.Recv()
	if err != nil {
		// Another agent refused its share, or the run was stopped.
		log.Info("share abandoned before connect: nothing was sent", "reason", err)
		return err
	}
	if msg.GetConnect() == nil {
		return status.Errorf(codes.InvalidArgument, "agent %s: run stream: expected connect, got %T", a.cfg.Name, msg.GetMsg())
	}
	prep, err := eng.Prepare(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "agent %s: %v", a.cfg.Name, err)
	}
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Ready{Ready: &pb.Ready{
		Connections: int64(prep.Connections), UsableCpus: int32(a.cfg.CPUs), Errors: prep.Errors, CpuList: a.cfg.CPUList,
		Provenance: a.provenance,
	}}}); err != nil {
		return err
	}
	a.setState(pb.AgentState_AGENT_STATE_READY)
	next, err := stream.Recv()
	if err != nil {
		return err
	}
	start := next.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "run stream: expected start")
	}

	// Watch the stream while the share runs. Its end is the shutdown: the
	// load stops at once and nothing more is sent. A Stop ends the window
	// early: the engine stops issuing, drains, and Run returns as usual, so
	// the last intervals and Done still go out. The watcher's Recv returns
	// only when the stream ends, after this handler: the agent owns it
	// (Run joins it), not the handler.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var streamEnded atomic.Bool // the watcher saw the stream end
	a.watchers.Go(func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				streamEnded.Store(true)
				cancel()
				return
			}
			if msg.GetStop() != nil {
				log.Info("stop received: ending the window early")
				eng.EndWindow()
			}
		}
	})

	a.setState(pb.AgentState_AGENT_STATE_RUNNING)
	startAt := time.Unix(0, start.GetStartAtUnixNano())
	if d := startAt.Sub(a.cfg.Clock()); d > MaxStartAhead || d < -MaxStartAhead {
		return status.Errorf(codes.InvalidArgument, "agent %s: start instant %v from now (agent clock): want within %v", a.cfg.Name, d.Round(time.Millisecond), MaxStartAhead)
	}
	log.Info("share starting", "connections", share.Connections, "in", time.Until(startAt).Round(time.Millisecond))
	waitOf := cpuWait
	if a.cfg.SharedProcess {
		waitOf = func() time.Duration { return 0 }
	}
	lastCPU, lastWait := cpuTime(), waitOf()
	var sendErr error
	res, err := eng.Run(runCtx, startAt, func(iv engine.Interval) {
		if sendErr != nil {
			return
		}
		now, wait := cpuTime(), waitOf()
		hs := wire.IntervalHistogramsToProto(iv.Hists)
		counters := wire.CountsToProto(&iv.Counts)
		if mrun != nil {
			length := iv.End.Sub(iv.Start)
			busy := (now - lastCPU).Seconds() / max(length.Seconds()*float64(a.cfg.CPUs), 1e-9)
			if merr := mrun.Interval(metrics.Interval{Length: length, Counts: &iv.Counts, Latency: wire.HistogramBytes(hs, hist.Latency),
				TargetRPS: shareTargetAt(share, iv.Start.Sub(startAt.Add(share.Plan.Warmup))+length/2), CPUBusy: []float64{busy}, Agents: 1}); merr != nil {
				log.Warn("metrics", "interval", iv.Index, "err", merr)
			}
		}
		var firstSend int64
		if !iv.FirstSend.IsZero() {
			firstSend = iv.FirstSend.UnixNano()
		}
		sendErr = stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{
			FirstSendUnixNano: firstSend,
			Index:             int32(iv.Index),
			StartUnixNano:     iv.Start.UnixNano(),
			EndUnixNano:       iv.End.UnixNano(),
			Histograms:        hs,
			Counters:          counters,
			CpuTime:           durationpb.New(now - lastCPU),
			CpuWait:           durationpb.New(max(wait-lastWait, 0)),
		}}})
		lastCPU, lastWait = now, wait
		if sendErr != nil {
			lostStream = true
			cancel()
		}
	})
	if err != nil {
		if streamEnded.Load() || stream.Context().Err() != nil {
			// The coordinator gave the share up, or vanished (its
			// keepalive failed): the load stopped at once.
			lostStream = true
			log.Warn("the coordinator's run stream ended mid-share: the load stopped at once", "reason", err)
		} else {
			log.Info("share stopped", "reason", err)
		}
		return status.FromContextError(err).Err()
	}
	if sendErr != nil {
		return sendErr
	}
	a.setState(pb.AgentState_AGENT_STATE_DRAINING)
	stoppedEarly = res.StoppedEarly
	done := &pb.Done{
		InFlight: res.InFlight, Issued: res.Issued,
		WindowEndUnixNano: res.WindowEnd.UnixNano(),
		Warmup:            wire.CountsToProto(&res.Warmup),
		MaxStreams:        int32(res.MaxStreams),
		Stopped:           res.StoppedEarly,
	}
	for _, t := range res.StageChanges {
		var ns int64
		if !t.IsZero() {
			ns = t.UnixNano()
		}
		done.StageChangeUnixNano = append(done.StageChangeUnixNano, ns)
	}
	if !res.FirstSend.IsZero() {
		done.FirstSendUnixNano = res.FirstSend.UnixNano()
	}
	mix := make([]report.MixRun, len(res.Mix))
	for i, m := range res.Mix {
		mix[i] = report.MixRun{Counts: m.Counts, Latency: m.Latency}
	}
	if done.Mix, err = wire.MixToProto(mix); err != nil {
		return fmt.Errorf("agent %s: %w", a.cfg.Name, err)
	}
	log.Info("share done", "issued", res.Issued, "in_flight", res.InFlight, "stopped_early", res.StoppedEarly)
	return stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Done{Done: done}})
}

// decodeShare converts a Setup's share from the coordinator and checks it
// whole (plan.Share.Check): a malformed one is refused with
// InvalidArgument, naming the agent and the field, before anything else. A
// share with fields this build does not know (a plan setting added after
// it, sent by a newer coordinator) is refused with FailedPrecondition,
// naming them and the agent's version: run as far as this build
// understands it, it would not be the plan the report states.
func (a *Agent) decodeShare(m *pb.Share) (plan.Share, error) {
	if unknown := wire.UnknownFields(m); len(unknown) > 0 {
		return plan.Share{}, status.Errorf(codes.FailedPrecondition,
			"agent %s (phalanx %s) does not know the share's field(s) %s: the coordinator is newer; upgrade the agent or drop the setting",
			a.cfg.Name, version.Version, strings.Join(unknown, ", "))
	}
	share := wire.ShareFromProto(m)
	if err := share.Check(); err != nil {
		return plan.Share{}, status.Errorf(codes.InvalidArgument, "agent %s: malformed share: %v", a.cfg.Name, err)
	}
	return share, nil
}

// newEngine builds the engine of a checked share: its caps, then the
// engine, which resolves the target and checks it against the allowlist;
// nothing is sent to the target. Errors: gRPC status errors,
// PermissionDenied for a share over a cap or outside the allowlist (logged),
// InvalidArgument for a share the engine refuses.
func (a *Agent) newEngine(ctx context.Context, share plan.Share, log *slog.Logger) (*engine.Engine, error) {
	if err := a.checkCaps(share); err != nil {
		log.Warn("share refused", "err", err)
		return nil, err
	}
	eng, err := engine.New(ctx, engine.Config{Share: share, Workers: a.cfg.CPUs, Clock: a.cfg.Clock, Logger: log,
		Allow: a.cfg.AllowTargets, LookupHost: a.lookupHost})
	if err != nil {
		var refused *allow.RefusedError
		if errors.As(err, &refused) {
			log.Warn("share refused: target outside the allowlist", "err", err)
			return nil, status.Errorf(codes.PermissionDenied, "agent %s refuses the share: %v", a.cfg.Name, err)
		}
		return nil, status.Errorf(codes.InvalidArgument, "agent %s: %v", a.cfg.Name, err)
	}
	return eng, nil
}

// checkCaps refuses (PermissionDenied) a share above the agent's
// --max-connections or --max-rate, naming the cap, the share's value and
// the plan's total it is a part of.
func (a *Agent) checkCaps(s plan.Share) error {
	p := s.Plan
	if limit := a.cfg.MaxConnections; limit > 0 {
		asked, total, what := s.Connections, p.Connections, "connections"
		if s.MaxConnections > asked {
			asked, total, what = s.MaxConnections, p.MaxConnections, "max_connections"
		}
		if !p.OpenLoop() {
			for i, t := range s.StageTargets {
				if int(t) > asked && i < len(p.Stages) {
					asked, total, what = int(t), int(p.StageTarget(i)), fmt.Sprintf("stages[%d] target", i)
				}
			}
		}
		if asked > limit {
			return status.Errorf(codes.PermissionDenied,
				"agent %s refuses the share: it asks %d connections (its part of the plan's %s %d over %d agents), above the agent's --max-connections %d",
				a.cfg.Name, asked, what, total, s.Count, limit)
		}
	}
	if limit := a.cfg.MaxRate; limit > 0 {
		if !p.OpenLoop() {
			return status.Errorf(codes.PermissionDenied,
				"agent %s refuses the share: its --max-rate is %d requests/s and a closed-loop share has no rate bound: run open loop (-R, rate) at most %d requests/s per agent",
				a.cfg.Name, limit, limit)
		}
		asked, total, what := s.Rate, p.Rate, "rate"
		for i, t := range s.StageTargets {
			if t > asked && i < len(p.Stages) {
				asked, total, what = t, p.StageTarget(i), fmt.Sprintf("stages[%d] rate", i)
			}
		}
		if asked > limit {
			return status.Errorf(codes.PermissionDenied,
				"agent %s refuses the share: it asks %d requests/s (its part of the plan's %s %d over %d agents), above the agent's --max-rate %d",
				a.cfg.Name, asked, what, total, s.Count, limit)
		}
	}
	return nil
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

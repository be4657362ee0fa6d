package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/version"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// DefaultGRPCAddr is the coordinator's default gRPC listen address, the
// one coordctl dials by default.
const DefaultGRPCAddr = "127.0.0.1:7000"

// Config configures a coordinator. DefaultConfig returns one with every
// default filled in; New fills in any field left at its zero value the same
// way, so a literal Config works too (except LAN, whose zero is local
// timings).
type Config struct {
	// Name is the coordinator's cluster name. Default (and zero):
	// "coordinator-" plus the host name, derived by New.
	Name string
	// GRPCAddr is the gRPC listen address for coordctl, host:port; port 0
	// picks a free port. Default DefaultGRPCAddr ("127.0.0.1:7000"); zero
	// means the default.
	GRPCAddr string
	// GossipAddr is the memberlist bind address, host:port (TCP and UDP);
	// port 0 picks a free port. Default cluster.DefaultBindAddr
	// ("0.0.0.0:7946"); zero means the default.
	GossipAddr string
	// Join lists the members to join, as agent.Config.Join: gossip
	// addresses, DNS names (every address each resolves to) or
	// cluster.SRVScheme records, resolved again at every rejoin. Default
	// (and zero): none, agents join the coordinator instead.
	Join []string
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
	// LAN selects memberlist's LAN timings. Default true; false (the zero
	// value) selects its local timings (faster failure detection, for one
	// host and tests).
	LAN bool
	// StartDelay is how far in the future the start instant is placed once
	// every agent is ready, on top of the largest agent RTT. Default
	// 100 ms; zero or negative means the default.
	StartDelay time.Duration
	// PrepareTimeout is the fixed part of the deadline for every agent to
	// be ready (clock samples, share accepted, all connections open): a
	// run adds 5 ms per agent and 1 ms per connection of its largest share
	// (prepareBudget), so 10,000 agents get 80 s by default. Default 30 s
	// (the daemon's --prepare-timeout); zero or negative means the default.
	PrepareTimeout time.Duration
	// ClockSamples is the number of clock samples taken per agent. Default
	// 8; zero or negative means the default.
	ClockSamples int
	// Security sets the credentials of the gRPC server (for coordctl:
	// mutual TLS accepting the client and coordinator roles) and of the
	// dials to agents (verifying the agent role), or insecure. Default (and
	// zero): insecure, which New refuses when GRPCAddr or GossipAddr is not
	// loopback, as it refuses a GossipAddr that is not loopback without
	// GossipKeyFile, unless Security.InsecureCluster (then the coordinator
	// warns at start and at every run).
	Security security.Config
	// MetricsAddr is the listen address (host:port) of the Prometheus
	// /metrics endpoint (internal/metrics; README "Prometheus metrics"):
	// with mutual TLS in Security it is HTTPS and takes only client
	// certificates of the cluster's CA; without, plain HTTP, which New
	// refuses on an address that is not loopback unless
	// Security.InsecureCluster (security.Config.CheckMetrics). Port 0 picks
	// a free port. Default (and zero): none, no metrics.
	MetricsAddr string
	// MetricsRuns is how many runs keep their series on /metrics (the
	// last ones started; a run in progress always does). Default
	// metrics.DefaultKeep (10); zero or negative means the default.
	MetricsRuns int
	// Logger is the coordinator's logger. Default (and nil): slog.Default().
	Logger *slog.Logger
	// DataDir is the run store's directory (internal/store: DIR/runs.db,
	// created mode 0700): every run is kept there, from its acceptance on,
	// and CoordinatorService's ListRuns, GetRun, DeleteRun and ImportRun
	// serve it. Zero means no run store (those calls then fail with
	// FailedPrecondition); the daemon's flag defaults to store.DaemonDir
	// (/var/lib/phalanx).
	DataDir string
}

// DefaultConfig returns the coordinator's defaults, the ones its flags
// show: gRPC on DefaultGRPCAddr, gossip on cluster.DefaultBindAddr with
// LAN timings, no gossip key, label cluster.DefaultLabel, start delay 100 ms, prepare timeout 30 s, 8 clock samples,
// insecure gRPC, slog.Default(). Name is left empty (New derives it).
func DefaultConfig() Config {
	return Config{
		GRPCAddr:       DefaultGRPCAddr,
		GossipAddr:     cluster.DefaultBindAddr,
		ClusterLabel:   cluster.DefaultLabel,
		LAN:            true,
		StartDelay:     100 * time.Millisecond,
		PrepareTimeout: 30 * time.Second,
		ClockSamples:   8,
		Logger:         slog.Default(),
	}
}

// Coordinator is a running coordinator daemon.
type Coordinator struct {
	cfg     Config
	lis     net.Listener
	grpc    *grpc.Server
	cluster *cluster.Cluster
	log     *slog.Logger

	dialCreds grpc.DialOption // credentials of the dials to agents
	peerCreds grpc.DialOption // of the dials to other coordinators (keyring)

	// insecureWarning is logged at start and at every run when the
	// coordinator runs without mutual TLS on a network address
	// (--insecure-cluster).
	insecureWarning string

	mu   sync.Mutex      // guards busy and active
	busy map[string]bool // agents in a run of this coordinator, by name
	// mismatched holds the agents whose gossiped gRPC security differs
	// from the coordinator's, warned about once each (guarded by mu).
	mismatched map[string]bool
	active     map[string]*activeRun // runs in progress, by run ID (for StopRun)

	metrics    *metrics.Daemon // nil without MetricsAddr
	metricsSrv *metrics.Server
	store      *store.Store // the run store; nil without Config.DataDir
	closeOnce  sync.Once
}

// New validates cfg and binds the gRPC and gossip ports; it contacts no
// peer.
func New(cfg Config) (*Coordinator, error) {
	def := DefaultConfig()
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = def.GRPCAddr
	}
	if cfg.GossipAddr == "" {
		cfg.GossipAddr = def.GossipAddr
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = "coordinator-" + host
	}
	if cfg.StartDelay <= 0 {
		cfg.StartDelay = def.StartDelay
	}
	if cfg.PrepareTimeout <= 0 {
		cfg.PrepareTimeout = def.PrepareTimeout
	}
	if cfg.ClockSamples <= 0 {
		cfg.ClockSamples = def.ClockSamples
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
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
	serverOpts, err := cfg.Security.ServerOptions(cfg.Logger.With("component", "coordinator"))
	if err != nil {
		return nil, err
	}
	dialCreds, err := cfg.Security.DialOption()
	if err != nil {
		return nil, err
	}
	peerCreds, err := cfg.Security.DialOptionTo(security.RoleCoordinator)
	if err != nil {
		return nil, err
	}
	var st *store.Store
	if cfg.DataDir != "" {
		if st, err = store.Open(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("%w (%s)", err, dataDirHint(cfg.DataDir, err))
		}
	}
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		closeStore(st)
		return nil, fmt.Errorf("listen grpc on %s: %w", cfg.GRPCAddr, err)
	}
	c := &Coordinator{cfg: cfg, lis: lis, dialCreds: dialCreds, peerCreds: peerCreds, insecureWarning: insecureWarning,
		log: cfg.Logger.With("component", "coordinator"), busy: map[string]bool{}, active: map[string]*activeRun{},
		mismatched: map[string]bool{}, store: st}
	c.cluster, err = cluster.New(cluster.Config{
		Name: cfg.Name, BindAddr: cfg.GossipAddr, LAN: cfg.LAN, Logger: c.log,
		KeyFile: cfg.GossipKeyFile, Label: cfg.ClusterLabel, OnMember: c.checkMember,
		Meta: func() *pb.NodeMeta {
			return &pb.NodeMeta{Role: pb.Role_ROLE_COORDINATOR, Name: cfg.Name, GrpcAddr: lis.Addr().String(), Version: version.Version,
				GrpcSecurity: wire.SecurityToProto(cfg.Security.Mode)}
		},
	})
	if err != nil {
		lis.Close()
		closeStore(st)
		return nil, err
	}
	if err := c.setupMetrics(); err != nil {
		_ = c.cluster.Leave(0) // the error returned says why
		lis.Close()
		closeStore(st)
		return nil, err
	}
	c.grpc = grpc.NewServer(append(serverOpts, grpc.MaxRecvMsgSize(maxImportBytes))...)
	pb.RegisterCoordinatorServiceServer(c.grpc, &service{c: c})
	return c, nil
}

// maxImportBytes bounds a request the coordinator accepts: an ImportRun
// carries a whole stored run, past gRPC's default 4 MiB after about a
// quarter of an hour of 1-s intervals with their progress messages. Under
// mTLS (Config.Security) only a client whose certificate the cluster's CA
// signed gets to send one.
const maxImportBytes = 1 << 30

// GRPCAddr returns the bound gRPC address.
func (c *Coordinator) GRPCAddr() string { return c.lis.Addr().String() }

// GossipAddr returns the bound gossip address, for agents' --join.
func (c *Coordinator) GossipAddr() string { return c.cluster.Addr() }

// Run joins the cluster (when Join is set) and serves until ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := c.grpc.Serve(c.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve grpc: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if _, err := c.cluster.Join(ctx, c.cfg.Join); err != nil && ctx.Err() == nil {
			return err
		}
		// Rejoin --join members that restart or drop out, as agents do.
		c.cluster.KeepJoined(ctx, c.cfg.Join)
		return nil
	})
	if c.metricsSrv != nil {
		g.Go(func() error { return c.metricsSrv.Run(ctx) })
	}
	g.Go(func() error {
		<-ctx.Done()
		if err := c.cluster.Leave(time.Second); errors.Is(err, cluster.ErrLeaveUnconfirmed) {
			c.log.Info("leave", "err", err) // the whole cluster stopping at once
		} else if err != nil {
			c.log.Warn("leave", "err", err)
		} else {
			c.log.Info("left the cluster") // its members were told: none waits for it to time out
		}
		done := make(chan struct{})
		go func() { c.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			c.grpc.Stop()
			<-done // GracefulStop returns once the handlers have
		}
		return nil
	})
	started := []any{"grpc_listen", cluster.ListenAddr(c.cfg.GRPCAddr, c.lis.Addr().(*net.TCPAddr).Port),
		"gossip_listen", c.cluster.ListenAddr(), "gossip_advertise", c.GossipAddr()}
	started = append(started, c.cfg.Security.LogAttrs(c.cfg.GossipKeyFile != "")...)
	if c.metricsSrv != nil {
		started = append(started, "metrics_listen", c.metricsSrv.Addr(), "metrics_tls", c.metricsSrv.TLS())
	}
	// Where runs are kept, said once: the default is the daemon's
	// directory, which root may be using without having asked for it.
	dataDir := c.cfg.DataDir
	if dataDir == "" {
		dataDir = "(none: runs are not stored)"
	}
	started = append(started, "data_dir", dataDir)
	c.log.Info("coordinator started", append(started, "gossip_keys", len(c.cluster.Keys()), "cluster_label", c.cluster.Label())...)
	if c.insecureWarning != "" {
		c.log.Warn(c.insecureWarning)
	}
	err := g.Wait()
	c.Close()
	if err != nil {
		c.log.Error("coordinator stopped", "err", err)
	} else {
		c.log.Info("coordinator stopped")
	}
	return err
}

// Close closes the run store, once every run has ended; Run calls it
// when it returns. Idempotent. A coordinator that New made but that never
// ran is closed with it.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() { closeStore(c.store) })
}

func closeStore(st *store.Store) {
	if st != nil {
		_ = st.Close()
	}
}

// Agents returns the live agents, sorted by name.
func (c *Coordinator) Agents() []*pb.NodeMeta {
	var out []*pb.NodeMeta
	for _, m := range c.cluster.Members() {
		if m.GetRole() == pb.Role_ROLE_AGENT {
			out = append(out, m)
		}
	}
	return out
}

// securityMismatch says why the coordinator cannot dial agent m, from the
// gRPC security m gossips: "" when it matches the coordinator's or m does
// not gossip it.
func (c *Coordinator) securityMismatch(m *pb.NodeMeta) string {
	own, theirs := wire.SecurityToProto(c.cfg.Security.Mode), m.GetGrpcSecurity()
	if theirs == pb.GrpcSecurity_GRPC_SECURITY_UNSPECIFIED || theirs == own {
		return ""
	}
	flags := fmt.Sprintf("--%s, --%s and --%s", security.FlagCA, security.FlagCert, security.FlagKey)
	if own == pb.GrpcSecurity_GRPC_SECURITY_MUTUAL_TLS {
		return "its gRPC is plaintext while this coordinator's is mutual TLS: start the agent with " + flags
	}
	return "its gRPC is mutual TLS while this coordinator's is plaintext: start the coordinator with " + flags
}

// checkMember is the cluster's OnMember: it warns once when an agent
// whose gRPC security differs from the coordinator's joins (or changes to
// it), as selectAgents will not use it.
func (c *Coordinator) checkMember(name string, m *pb.NodeMeta) {
	reason := ""
	if m != nil && m.GetRole() == pb.Role_ROLE_AGENT {
		reason = c.securityMismatch(m)
	}
	c.mu.Lock()
	warn := reason != "" && !c.mismatched[name]
	if reason == "" {
		delete(c.mismatched, name)
	} else {
		c.mismatched[name] = true
	}
	c.mu.Unlock()
	if warn {
		c.log.Warn("agent not usable for runs: "+reason, "agent", name, "grpc", m.GetGrpcAddr())
	}
}

// service implements the Coordinator gRPC service.
type service struct {
	pb.UnimplementedCoordinatorServiceServer
	c *Coordinator
}

var _ pb.CoordinatorServiceServer = (*service)(nil)

func (s *service) ListAgents(context.Context, *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	return &pb.ListAgentsResponse{Agents: s.c.Agents()}, nil
}

func (s *service) RunPlan(req *pb.RunPlanRequest, stream pb.CoordinatorService_RunPlanServer) error {
	// A request with settings this build does not know (a newer coordctl's)
	// is refused before anything runs: run without them, the load would
	// not be the plan the report states (as an agent refuses such a share).
	if unknown := wire.UnknownFields(req); len(unknown) > 0 {
		return status.Errorf(codes.FailedPrecondition,
			"coordinator %s (phalanx %s) does not know the request's field(s) %s: coordctl is newer; upgrade the coordinator or drop the setting",
			s.c.cfg.Name, version.Version, strings.Join(unknown, ", "))
	}
	p := wire.PlanFromProto(req.GetPlan())
	res, err := s.c.Execute(stream.Context(), p, optionsFromProto(req), RunHooks{
		Accepted: func(a *pb.RunAccepted) {
			_ = stream.Send(&pb.RunPlanResponse{Msg: &pb.RunPlanResponse_Accepted{Accepted: a}})
		},
		Progress: func(pr *pb.Progress) {
			_ = stream.Send(&pb.RunPlanResponse{Msg: &pb.RunPlanResponse_Progress{Progress: pr}})
		},
		Lost: func(l *pb.AgentLost) {
			_ = stream.Send(&pb.RunPlanResponse{Msg: &pb.RunPlanResponse_AgentLost{AgentLost: l}})
		},
		AgentIntervals: req.GetAgentIntervals(),
	})
	if res != nil {
		// A partial result (an agent died) is still sent: nothing measured
		// is lost. The error then travels in the result's agent rows.
		if serr := stream.Send(&pb.RunPlanResponse{Msg: &pb.RunPlanResponse_Result{Result: res}}); serr != nil {
			return serr
		}
	}
	return err
}

func (s *service) StopRun(_ context.Context, req *pb.StopRunRequest) (*pb.StopRunResponse, error) {
	if err := s.c.StopRun(req.GetRunId()); err != nil {
		return nil, err
	}
	return &pb.StopRunResponse{}, nil
}

// Keyring applies a gossip keyring operation to every live member
// (Coordinator.Keyring).
func (s *service) Keyring(ctx context.Context, req *pb.KeyringRequest) (*pb.KeyringResponse, error) {
	return s.c.Keyring(ctx, req.GetOp(), req.GetKey())
}

// MemberKeyring applies a gossip keyring operation to this coordinator
// only, for another coordinator's Keyring.
func (s *service) MemberKeyring(_ context.Context, req *pb.MemberKeyringRequest) (*pb.MemberKeyringResponse, error) {
	keys, err := s.c.cluster.Keyring(req.GetOp(), req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.MemberKeyringResponse{Keys: keys}, nil
}

// toStatus maps run errors to gRPC status codes at the server boundary. A
// join of several errors (one per agent) becomes one status whose code is
// the first one's and whose message lists every message once.
func toStatus(err error) error {
	var fe *plan.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNoAgents):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		code := codes.Unknown
		var msgs []string
		for _, e := range j.Unwrap() {
			st := status.Convert(toStatus(e))
			if code == codes.Unknown {
				code = st.Code()
			}
			msgs = append(msgs, st.Message())
		}
		return status.Error(code, joinAgentMessages(msgs))
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// dataDirHint says which flag to set when the run store in dir cannot be
// opened: for a permission error (a user who is not root starting the
// daemon with the default /var/lib/phalanx, which the systemd unit's
// StateDirectory provides), a directory of the user's own, the XDG state
// home's ($XDG_STATE_HOME/phalanx, else ~/.local/state/phalanx).
func dataDirHint(dir string, err error) string {
	if !errors.Is(err, fs.ErrPermission) {
		return "give another --data-dir, or --data-dir '' to keep no runs"
	}
	own := "$HOME/.local/state/phalanx"
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		own = filepath.Join(d, "phalanx")
	} else if home, herr := os.UserHomeDir(); herr == nil {
		own = filepath.Join(home, ".local", "state", "phalanx")
	}
	return fmt.Sprintf("this user may not write %s: give a directory of its own, --data-dir %s, or --data-dir '' to keep no runs", dir, own)
}

// Command agent runs a Phalanx agent: it joins the cluster, advertises its
// gRPC address and CPUs, and generates load for the coordinator's plans.
//
//	agent --grpc-addr 10.0.0.5:7070 --gossip-addr 10.0.0.5:7946 --join 10.0.0.1:7946 \
//	      --tls-ca phalanx-ca.pem --tls-cert phalanx-agent-a5.pem --tls-key phalanx-agent-a5-key.pem
//
// On a non-loopback address it needs mutual TLS (--tls-*) or --insecure-cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // profiles behind --pprof-addr
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/cpuset"
	"github.com/phalanxload/phalanx/internal/daemon"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/version"
)

// main exits 2 on a bad command line and 1 on a run error, as coordctl
// does (daemon.Execute).
func main() {
	os.Exit(daemon.Execute(newCommand(), "agent", os.Args[1:], os.Stderr))
}

func newCommand() *cobra.Command {
	cfg := agent.DefaultConfig()
	var (
		cpus      string
		local     bool
		logLevel  string
		pprofAddr string
		allowSpec string
		tlsFiles  security.Files
		insecure  bool
		secFlags  []string
	)
	cmd := &cobra.Command{
		Use:           "agent",
		Short:         "Run a Phalanx load agent",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag may come from its PHALANX_ variable (the
			// command line wins), as the systemd unit's EnvironmentFile
			// gives them.
			if err := daemon.BindEnv(cmd.Flags(), daemon.FlagNames(cmd.Flags())...); err != nil {
				return daemon.Usage(err)
			}
			log, err := daemon.Logger(logLevel)
			if err != nil {
				return daemon.Usage(err)
			}
			if cfg.AllowTargets, err = allow.Parse(allowSpec); err != nil {
				return daemon.Usage(fmt.Errorf("--allow-targets: %w", err))
			}
			if cfg.MaxConnections < 0 {
				return daemon.Usage(fmt.Errorf("--max-connections %d: want 0 (no cap) or more", cfg.MaxConnections))
			}
			if cfg.MaxRate < 0 {
				return daemon.Usage(fmt.Errorf("--max-rate %d: want 0 (no cap) or more requests/s", cfg.MaxRate))
			}
			tlsFiles.From = daemon.Origins(cmd.Flags(), secFlags...)
			if cfg.Security, err = daemon.LoadSecurity(security.RoleAgent, tlsFiles, insecure); err != nil {
				return err
			}
			if cpus != "" {
				set, err := cpuset.Parse(cpus)
				if err != nil {
					return daemon.Usage(fmt.Errorf("--cpus: %w", err))
				}
				if err := cpuset.PinProcess(set); err != nil {
					return fmt.Errorf("--cpus %s: %w", cpus, err)
				}
				runtime.GOMAXPROCS(len(set))
				cfg.CPUs = len(set)
				cfg.CPUList = cpuset.Format(set)
				log.Info("pinned to cpus", "cpu_list", cfg.CPUList, "workers", cfg.CPUs)
			} else if set, narrowed, err := cpuset.Inherited(); err != nil {
				log.Warn("cpu affinity unknown; reporting the agent unpinned", "err", err)
			} else if narrowed {
				// Started in a cpuset (taskset, docker --cpuset-cpus, the
				// kubelet's static CPU manager): every thread is pinned to
				// it already; report it. GOMAXPROCS (so the workers) is
				// Go's default: the set's size, or the cgroup's CPU limit
				// when lower.
				cfg.CPUList = cpuset.Format(set)
				log.Info("pinned to the cpu set it was started in", "cpu_list", cfg.CPUList, "workers", cfg.CPUs)
			}
			cfg.LAN = !local
			cfg.Logger = log
			var pprof *http.Server
			var pprofLis net.Listener
			if pprofAddr != "" {
				// Profiles of the running agent (README, Performance):
				// go tool pprof http://ADDR/debug/pprof/profile?seconds=10
				if pprofLis, err = net.Listen("tcp", pprofAddr); err != nil {
					return fmt.Errorf("--pprof-addr: %w", err)
				}
				pprof = &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
				log.Info("pprof listening", "addr", pprofLis.Addr().String())
			}
			a, err := agent.New(cfg)
			if err != nil {
				if pprofLis != nil {
					pprofLis.Close()
				}
				return err
			}
			ctx, stop := daemon.SignalContext(log)
			defer stop()
			if pprof == nil {
				return a.Run(ctx)
			}
			// The agent and the pprof server end together.
			ctx, cancel := context.WithCancel(ctx)
			g := new(errgroup.Group)
			g.Go(func() error {
				defer cancel()
				return a.Run(ctx)
			})
			g.Go(func() error {
				if err := pprof.Serve(pprofLis); !errors.Is(err, http.ErrServerClosed) {
					log.Warn("pprof server", "err", err)
				}
				return nil
			})
			g.Go(func() error {
				<-ctx.Done()
				_ = pprof.Close()
				return nil
			})
			return g.Wait()
		},
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	f := cmd.Flags()
	f.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address HOST:PORT (the coordinator connects here)")
	f.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cfg.AdvertiseAddr, "gRPC address to advertise, when --grpc-addr's host is 0.0.0.0 (default: the gossip address's host)")
	f.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "memberlist gossip address HOST:PORT (TCP and UDP)")
	f.StringSliceVar(&cfg.Join, "join", cfg.Join, "cluster members to join, HOST:PORT[,...]: a DNS name joins every address it resolves to, dns+srv://NAME every target of an SRV record (retried until one answers, then resolved again and rejoined whenever an address is not a live member, e.g. a restarted coordinator or a replaced pod)")
	f.DurationVar(&cfg.RejoinInterval, "rejoin-interval", cfg.RejoinInterval, "how often to check that the --join members are live and rejoin those that are not (failed rejoins back off to "+cluster.MaxRejoinBackoff.String()+")")
	f.StringVar(&cfg.Name, "name", cfg.Name, "unique agent name (default: host name and gRPC port)")
	f.StringVar(&cpus, "cpus", "", "pin load generation to these CPUs, e.g. 2-15 or 0,2,4, within those the process may use (default: all the process may use; a set it was started in, by taskset or a container's cpuset, is reported as its pin map)")
	f.StringVar(&cfg.GossipKeyFile, "gossip-key-file", cfg.GossipKeyFile, "encrypt gossip with the keys in this file: base64 AES-256 keys (coordctl keygen), one per line, the first primary; rewritten by coordctl keyring; mode 0600; needed on a non-loopback --gossip-addr (default: plaintext gossip; env PHALANX_GOSSIP_KEY_FILE)")
	f.StringVar(&cfg.ClusterLabel, "cluster-label", cfg.ClusterLabel, "cluster label: members with another label never merge with this one (env PHALANX_CLUSTER_LABEL)")
	f.BoolVar(&local, "local", !cfg.LAN, "use memberlist's local-network timings (faster failure detection, for one host)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&allowSpec, "allow-targets", cfg.AllowTargets.String(), "targets this agent may load, comma-separated: CIDRs (198.18.0.0/15), addresses (127.0.0.1, [::1]:8443), host names (host.example:443) and domain wildcards (*.lab.example); checked on the address dialled, after resolution, before any packet (README, Allowlists and caps)")
	f.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "refuse a share that would open more connections on this agent (0: no cap)")
	f.Int64Var(&cfg.MaxRate, "max-rate", cfg.MaxRate, "refuse a share above this rate on this agent, requests/s, and any closed-loop share (0: no cap)")
	// Origins of the credential and gossip flags (every flag is read from
	// the environment: daemon.FlagNames).
	secFlags = append(daemon.SecurityFlags(f, &tlsFiles, &insecure), "gossip-key-file", "cluster-label")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve net/http/pprof profiles on HOST:PORT (e.g. 127.0.0.1:6060); off by default")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "serve Prometheus metrics on HOST:PORT/metrics (off by default); with --tls-* over mutual TLS (a client certificate of the CA), else plain HTTP, on loopback only unless --insecure-cluster")
	f.IntVar(&cfg.MetricsRuns, "metrics-runs", metrics.DefaultKeep, "shares that keep their series on /metrics (the last ones started)")
	return cmd
}

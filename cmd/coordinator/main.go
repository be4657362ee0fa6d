// Command coordinator runs the Phalanx coordinator: a cluster member that
// keeps the live agent view, runs plans submitted by coordctl across the
// agents and merges their measurements.
//
//	coordinator --grpc-addr 10.0.0.1:7000 --gossip-addr 10.0.0.1:7946 \
//	      --tls-ca phalanx-ca.pem --tls-cert phalanx-coordinator-c1.pem --tls-key phalanx-coordinator-c1-key.pem
//
// On a non-loopback address it needs mutual TLS (--tls-*) or --insecure-cluster.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/daemon"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/version"
)

// main exits 2 on a bad command line and 1 on a run error, as coordctl
// does (daemon.Execute).
func main() {
	os.Exit(daemon.Execute(newCommand(), "coordinator", os.Args[1:], os.Stderr))
}

func newCommand() *cobra.Command {
	cfg := coordinator.DefaultConfig()
	var (
		local    bool
		logLevel string
		tlsFiles security.Files
		insecure bool
		secFlags []string
	)
	cmd := &cobra.Command{
		Use:           "coordinator",
		Short:         "Run the Phalanx coordinator",
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
			if cfg.PrepareTimeout <= 0 {
				return daemon.Usage(fmt.Errorf("--prepare-timeout %v: want more than 0", cfg.PrepareTimeout))
			}
			tlsFiles.From = daemon.Origins(cmd.Flags(), secFlags...)
			if cfg.Security, err = daemon.LoadSecurity(security.RoleCoordinator, tlsFiles, insecure); err != nil {
				return err
			}
			cfg.LAN = !local
			cfg.Logger = log
			c, err := coordinator.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := daemon.SignalContext(log)
			defer stop()
			return c.Run(ctx)
		},
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	f := cmd.Flags()
	f.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address HOST:PORT for coordctl")
	f.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "memberlist gossip address HOST:PORT (agents --join this)")
	f.StringSliceVar(&cfg.Join, "join", cfg.Join, "cluster members to join, HOST:PORT[,...]: a DNS name joins every address it resolves to, dns+srv://NAME every target of an SRV record (resolved again at every rejoin)")
	f.StringVar(&cfg.Name, "name", cfg.Name, "unique member name in the cluster's gossip (default: coordinator-HOSTNAME)")
	f.StringVar(&cfg.GossipKeyFile, "gossip-key-file", cfg.GossipKeyFile, "encrypt gossip with the keys in this file: base64 AES-256 keys (coordctl keygen), one per line, the first primary; rewritten by coordctl keyring; mode 0600; needed on a non-loopback --gossip-addr (default: plaintext gossip; env PHALANX_GOSSIP_KEY_FILE)")
	f.StringVar(&cfg.ClusterLabel, "cluster-label", cfg.ClusterLabel, "cluster label: members with another label never merge with this one (env PHALANX_CLUSTER_LABEL)")
	f.DurationVar(&cfg.PrepareTimeout, "prepare-timeout", cfg.PrepareTimeout, "fixed part of a run's deadline for its agents to be ready (clock samples, shares accepted, connections open); each run adds 5ms per agent and 1ms per connection of its largest share")
	f.BoolVar(&local, "local", !cfg.LAN, "use memberlist's local-network timings (faster failure detection, for one host)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "serve Prometheus metrics on HOST:PORT/metrics (off by default); with --tls-* over mutual TLS (a client certificate of the CA), else plain HTTP, on loopback only unless --insecure-cluster")
	f.IntVar(&cfg.MetricsRuns, "metrics-runs", metrics.DefaultKeep, "runs that keep their series on /metrics (the last ones started)")
	cfg.DataDir = store.DaemonDir
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "run store directory: every run is kept in DIR/runs.db (coordctl runs, report, export, import, rm); '' keeps none (env PHALANX_DATA_DIR)")
	// Origins of the credential and gossip flags (every flag is read from
	// the environment: daemon.FlagNames).
	secFlags = append(daemon.SecurityFlags(f, &tlsFiles, &insecure), "gossip-key-file", "cluster-label")
	return cmd
}

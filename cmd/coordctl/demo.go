package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/tlsgen"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func newDemoCmd() *cobra.Command {
	var (
		agents      int
		connections int
		duration    = windowDuration(5 * time.Second)
		jsonFile    string
		htmlFile    string
		formats     formatFlags
		dataDir     = defaultUserDir()
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole cluster in this process on loopback: a built-in HTTPS target, a coordinator and agents",
		Long: `demo starts, inside this one process and on 127.0.0.1 only, a built-in HTTPS
target (with a certificate from a throwaway CA generated now), a coordinator
and two agents talking real gRPC and memberlist gossip, runs a closed-loop
test against the target, and prints the merged report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonOut, err := openOutput("--json", jsonFile)
			if err != nil {
				return err
			}
			defer jsonOut.discard()
			files, err := formats.open()
			if err != nil {
				return err
			}
			defer files.discard()
			htmlOut, err := openHTMLOutput(htmlFile)
			if err != nil {
				return err
			}
			defer htmlOut.discard()
			ctx := cmd.Context()
			out := cmd.ErrOrStderr()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

			ca, err := tlsgen.New()
			if err != nil {
				return err
			}
			srv, err := target.New(target.Config{Cert: ca.Cert})
			if err != nil {
				return err
			}
			tctx, stopTarget := context.WithCancel(context.Background())
			tdone := make(chan error, 1)
			go func() { tdone <- srv.Run(tctx) }()
			defer func() {
				stopTarget()
				if err := <-tdone; err != nil {
					fmt.Fprintln(out, "demo:", err)
				}
			}()

			c, err := localcluster.StartWith(ctx, localcluster.Options{Agents: agents, Logger: quiet, DataDir: dataDir})
			if errors.Is(err, store.ErrInUse) {
				// Another demo (or a coordinator) has the store: run anyway,
				// without keeping this run.
				fmt.Fprintf(out, "demo: %v; this run is not stored\n", err)
				dataDir = ""
				c, err = localcluster.StartWith(ctx, localcluster.Options{Agents: agents, Logger: quiet})
			}
			if err != nil {
				return err
			}
			defer c.Close()
			fmt.Fprintf(out, "demo: target %s, coordinator %s (gossip %s), %d agents\n",
				srv.URL(), c.Coordinator.GRPCAddr(), c.Coordinator.GossipAddr(), len(c.Agents))

			p := plan.Plan{URL: srv.URL(), Connections: connections, Duration: time.Duration(duration), TLS: plan.TLS{CAPEM: ca.CAPEM}}
			p.SetDefaults()
			if err := p.Validate(); err != nil {
				return &usageError{err}
			}
			fmt.Fprintf(out, "demo: coordctl run -c%d -d%s --latency %s\n", p.Connections, p.Duration, p.URL)
			view := newProgressView(out, p, false)
			sum := &summary{w: cmd.OutOrStdout(), format: formatText, latency: true, p: p}
			if jsonOut.name == "-" {
				sum.format = "" // JSON alone on stdout
			}
			res, err := c.Coordinator.RunPlanWith(ctx, p, coordinator.RunHooks{
				Accepted: func(a *pb.RunAccepted) {
					view.accepted(a)
					sum.accepted(int(a.GetAgents()))
				},
				Progress: view.interval,
				Lost:     func(l *pb.AgentLost) { printLoss(view, l, wire.PlanToProto(p).GetOnAgentLoss()) },

				AgentIntervals: formats.agentIntervals(),
			})
			view.done()
			if err != nil {
				return err
			}
			run, err := wire.RunFromProto(res)
			if err != nil {
				return err
			}
			rep, err := report.Build(run)
			if err != nil {
				return err
			}
			rep.NotStored = dataDir == ""
			if err := writeReport(cmd, rep, sum, jsonOut); err != nil {
				return err
			}
			if err := files.write(run); err != nil {
				return err
			}
			if err := htmlOut.writeHTML(run, rep); err != nil {
				return err
			}
			fmt.Fprintf(out, "demo: the target counted %d requests; the report has %d completed + %d in flight\n",
				srv.Requests(), rep.Requests, rep.InFlight)
			if dataDir != "" {
				where := "--local"
				if dataDir != defaultUserDir() {
					where = "--data-dir " + dataDir
				}
				fmt.Fprintf(out, "demo: stored as run %s in %s (coordctl runs %s; coordctl report %s %s)\n", rep.RunID, dataDir, where, where, rep.RunID)
			}
			if rep.Partial {
				return &exitError{exitPartial, notWhole(rep)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&agents, "agents", 2, "agents to start")
	fl.IntVarP(&connections, "connections", "c", 20, "connections, total")
	fl.VarP(&duration, "duration", "d", "measurement window")
	fl.StringVar(&jsonFile, "json", "", "also write the report as JSON to this file ('-' for stdout)")
	fl.StringVar(&htmlFile, "html", "", "also write the report as one self-contained HTML page to this file")
	formats.register(fl)
	fl.StringVar(&dataDir, "data-dir", dataDir, "run store directory the demo's coordinator keeps the run in ('' for none; coordctl runs --local lists the default's)")
	return cmd
}

// defaultUserDir is the per-user run store (store.UserDir), or "" (no
// store) when there is no home directory.
func defaultUserDir() string {
	d, err := store.UserDir()
	if err != nil {
		return ""
	}
	return d
}

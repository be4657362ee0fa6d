package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func newAgentsCmd(co *coordinatorFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "agents",
		Short: "List the live agents (name, gRPC address, security, CPUs and those pinned, state, version, caps, target allowlist)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, closeConn, err := co.dial()
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			resp, err := client.ListAgents(ctx, &pb.ListAgentsRequest{})
			if err != nil {
				return &prefixedError{"coordinator " + co.addr + " unreachable", err}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tADDRESS\tSECURITY\tCPUS\tPINNED\tSTATE\tVERSION\tMAX-CONNS\tMAX-RATE\tALLOW-TARGETS")
			for _, a := range resp.GetAgents() {
				state := strings.ToLower(strings.TrimPrefix(a.GetState().String(), "AGENT_STATE_"))
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetName(), a.GetGrpcAddr(), wire.SecurityText(a.GetGrpcSecurity()), a.GetCpus(), pinnedText(a), state, a.GetVersion(),
					capText(a.GetMaxConnections()), capText(a.GetMaxRate()), allowText(a))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(resp.GetAgents()) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no agents alive")
			}
			return nil
		},
	}
}

// pinnedText renders the CPUs an agent is pinned to (agent --cpus), as
// the report's PINNED column: "-" when not pinned.
func pinnedText(a *pb.NodeMeta) string {
	if a.GetCpuList() == "" {
		return "-"
	}
	return a.GetCpuList()
}

// capText renders a cap, "-" for none.
func capText(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// allowText renders an agent's allowlist as its meta carries it: cut to
// fit memberlist's meta, with how many entries were left off (the agent
// logs the whole list at start).
func allowText(a *pb.NodeMeta) string {
	s := a.GetAllowTargets()
	if s == "" && a.GetAllowTargetsOmitted() == 0 {
		return "?" // an agent that does not gossip its allowlist
	}
	switch n := a.GetAllowTargetsOmitted(); {
	case n > 0 && s == "":
		return fmt.Sprintf("(%d entries: see the agent's log)", n)
	case n > 0:
		s += fmt.Sprintf(" (+%d more entries: see the agent's log)", n)
	}
	return s
}

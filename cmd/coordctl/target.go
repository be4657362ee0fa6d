package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// newTargetCmd serves the built-in HTTPS target: a fixed 600-byte page,
// with a certificate from a throwaway CA written to --ca-out, counting
// requests. It is for smoke tests and for the project's own tests; it is
// no benchmark server. With --workers N --service-time D it is a modelled
// server of known capacity N/D (target.Model). With --http3 (the default)
// it also serves HTTP/3 on the UDP port of the same number.
func newTargetCmd() *cobra.Command {
	var addr, caOut string
	var http3 bool
	var hosts []string
	var workers int
	var service time.Duration
	cmd := &cobra.Command{
		Use:   "target",
		Short: "Serve the built-in HTTPS test target (counts requests; prints the counts when stopped)",
		Long: `Serve the built-in HTTPS test target: every request gets 200 and a fixed
600-byte page, over HTTP/1.1 and HTTP/2 on TCP and, with --http3 (on by
default), HTTP/3 over QUIC on the UDP port of the same number (0-RTT
allowed), for coordctl run --http3. The certificate comes from a throwaway
CA written to --ca-out once the address is bound (a target that cannot
listen leaves the file alone). When stopped (SIGINT, SIGTERM) it prints the
requests it served and the TCP and QUIC connections it accepted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := tlsgen.New(hosts...)
			if err != nil {
				return err
			}
			// Bind first: a target that cannot listen (its port taken by
			// another target, say) must not overwrite that one's --ca-out.
			srv, err := target.New(target.Config{Addr: addr, Cert: b.Cert, Workers: workers, ServiceTime: service, HTTP3: http3})
			if err != nil {
				return err
			}
			if caOut != "" {
				if err := os.WriteFile(caOut, b.CAPEM, 0o644); err != nil {
					_ = srv.Close()
					return fmt.Errorf("--ca-out: %w", err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "target %s listening\n", srv.URL())
			if srv.HTTP3() {
				fmt.Fprintf(cmd.OutOrStdout(), "HTTP/3 on UDP %s\n", srv.Addr())
			}
			if m := srv.Model(); m != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "modelled server: %d workers, service time %s, capacity %.0f requests/s\n", workers, service, m.Capacity())
			}
			err = srv.Run(ctx)
			fmt.Fprintf(cmd.OutOrStdout(), "requests=%d connections=%d quic_connections=%d\n", srv.Requests(), srv.Connections(), srv.QUICConnections())
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8443", "listen address HOST:PORT (TCP, and UDP with --http3)")
	cmd.Flags().BoolVar(&http3, "http3", true, "also serve HTTP/3 over QUIC on the UDP port of the same number (--http3=false: TCP only)")
	cmd.Flags().StringVar(&caOut, "ca-out", "", "write the CA certificate (PEM) to this file, for --cacert")
	cmd.Flags().IntVar(&workers, "workers", 0, "a modelled server: serve at most N requests at once, queueing the rest (with --service-time)")
	cmd.Flags().DurationVar(&service, "service-time", 0, "a modelled server: each request takes D (with --workers; capacity N/D requests/s)")
	cmd.Flags().StringSliceVar(&hosts, "hosts", nil, "certificate names and IPs (default localhost, 127.0.0.1, ::1 and test names)")

	return cmd
}

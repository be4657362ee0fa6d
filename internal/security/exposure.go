package security

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Listen is one listen address of a daemon and the flag that set it.
type Listen struct {
	// Flag is the flag's name with its dashes, e.g. "--gossip-addr".
	Flag string
	// Addr is the address, host:port.
	Addr string
}

// Exposure is the safe-default rule's input: what a daemon listens on and
// how it is protected. The rule (Check): a daemon any of whose listen
// addresses is not loopback runs only with mutual TLS, or with
// --insecure-cluster, and then warns.
type Exposure struct {
	// Listen are the daemon's listen addresses (gRPC, gossip).
	Listen []Listen
	// TLS is whether its gRPC hops use mutual TLS.
	TLS bool
	// InsecureCluster is --insecure-cluster: run unprotected on the
	// network anyway, warning.
	InsecureCluster bool
	// Loopback judges a host; nil: IsLoopbackHost.
	Loopback func(host string) bool
}

// Exposure returns the rule's input for a daemon with cfg's hop
// credentials listening on listen.
func (cfg Config) Exposure(listen ...Listen) Exposure {
	return Exposure{Listen: listen, TLS: cfg.Mode == ModeMutualTLS, InsecureCluster: cfg.InsecureCluster, Loopback: cfg.Loopback}
}

// CheckDaemon applies the rule (Exposure.Check) to a daemon with cfg's hop
// credentials that serves gRPC on grpcAddr (--grpc-addr) and gossips on
// gossipAddr (--gossip-addr): the one check the agent and the coordinator
// make, before they bind anything.
func (cfg Config) CheckDaemon(grpcAddr, gossipAddr string) (warning string, err error) {
	return cfg.Exposure(Listen{Flag: "--grpc-addr", Addr: grpcAddr}, Listen{Flag: "--gossip-addr", Addr: gossipAddr}).Check()
}

// Check applies the rule. It returns an error naming the first address
// that is not loopback when the daemon has no mutual TLS and no
// InsecureCluster; a warning (to log at start and at every run) when it has
// InsecureCluster and some address is not loopback; neither otherwise.
func (e Exposure) Check() (warning string, err error) {
	loopback := e.Loopback
	if loopback == nil {
		loopback = IsLoopbackHost
	}
	var exposed []string
	for _, l := range e.Listen {
		host, _, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", l.Flag, l.Addr, err)
		}
		if !loopback(host) {
			exposed = append(exposed, l.Flag+" "+l.Addr)
		}
	}
	if len(exposed) == 0 || e.TLS {
		return "", nil
	}
	if !e.InsecureCluster {
		return "", fmt.Errorf("%s is not a loopback address: a daemon on the network needs mutual TLS (--%s, --%s, --%s; README \"Securing a cluster\"), or --%s to run it unauthenticated",
			exposed[0], FlagCA, FlagCert, FlagKey, FlagInsecureCluster)
	}
	return fmt.Sprintf("insecure cluster (--%s): %s without mutual TLS, anyone who reaches it may run plans",
		FlagInsecureCluster, strings.Join(exposed, ", ")), nil
}

// IsLoopbackHost reports whether a listen address's host binds only
// loopback: an IP in 127.0.0.0/8 or ::1 (brackets allowed), or "localhost"
// (RFC 6761 keeps it on loopback). An empty host, 0.0.0.0, :: and every
// other name listen on the network.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.Unmap().IsLoopback()
}

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
	// Gossip marks the memberlist gossip address, which mutual TLS does
	// not protect: on the network it also needs a gossip key
	// (Exposure.GossipKey).
	Gossip bool
}

// Exposure is the safe-default rule's input: what a daemon listens on and
// how it is protected. The rule (Check): a daemon any of whose listen
// addresses is not loopback runs only with mutual TLS, and one whose gossip
// address is not loopback only with a gossip key too (--gossip-key-file),
// or with --insecure-cluster, and then warns.
type Exposure struct {
	// Listen are the daemon's listen addresses (gRPC, gossip).
	Listen []Listen
	// TLS is whether its gRPC hops use mutual TLS.
	TLS bool
	// GossipKey is whether its gossip is encrypted (--gossip-key-file).
	GossipKey bool
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
// gossipAddr (--gossip-addr), with its gossip encrypted when gossipKey
// (--gossip-key-file): the one check the agent and the coordinator make,
// before they bind anything.
func (cfg Config) CheckDaemon(grpcAddr, gossipAddr string, gossipKey bool) (warning string, err error) {
	e := cfg.Exposure(Listen{Flag: "--grpc-addr", Addr: grpcAddr}, Listen{Flag: "--gossip-addr", Addr: gossipAddr, Gossip: true})
	e.GossipKey = gossipKey
	return e.Check()
}

// Check applies the rule. It returns an error naming the first address
// that is not loopback and lacks a protection (mutual TLS; for gossip, a
// gossip key too) when the daemon has no InsecureCluster; a warning (to
// log at start and at every run) naming what runs unprotected when it has
// InsecureCluster; neither otherwise.
func (e Exposure) Check() (warning string, err error) {
	loopback := e.Loopback
	if loopback == nil {
		loopback = IsLoopbackHost
	}
	var exposed, plainGossip []string
	for _, l := range e.Listen {
		host, _, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", l.Flag, l.Addr, err)
		}
		if !loopback(host) {
			exposed = append(exposed, l.Flag+" "+l.Addr)
			if l.Gossip && !e.GossipKey {
				plainGossip = append(plainGossip, l.Flag+" "+l.Addr)
			}
		}
	}
	noTLS := len(exposed) > 0 && !e.TLS
	if !noTLS && len(plainGossip) == 0 {
		return "", nil
	}
	if !e.InsecureCluster {
		var first string
		var needs []string
		if noTLS {
			first = exposed[0]
			needs = append(needs, fmt.Sprintf("mutual TLS (--%s, --%s, --%s)", FlagCA, FlagCert, FlagKey))
		}
		if len(plainGossip) > 0 {
			if first == "" {
				first = plainGossip[0]
			}
			needs = append(needs, fmt.Sprintf("a gossip key for its gossip (--%s, made by coordctl keygen)", FlagGossipKeyFile))
		}
		return "", fmt.Errorf("%s is not a loopback address: a daemon on the network needs %s (README \"Securing a cluster\"), or --%s to run it unauthenticated",
			first, strings.Join(needs, " and "), FlagInsecureCluster)
	}
	var parts []string
	if noTLS {
		parts = append(parts, strings.Join(exposed, ", ")+" without mutual TLS, anyone who reaches it may run plans")
	}
	if len(plainGossip) > 0 {
		parts = append(parts, strings.Join(plainGossip, ", ")+" without a gossip key, anyone who reaches it may join the cluster and learn its members")
	}
	return fmt.Sprintf("insecure cluster (--%s): %s", FlagInsecureCluster, strings.Join(parts, "; ")), nil
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

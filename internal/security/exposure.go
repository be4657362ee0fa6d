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
	// Default marks an address the flag was not given for (the daemon's
	// default): messages say "(the default)".
	Default bool
}

// String is the flag and address as messages name them:
// "--gossip-addr 0.0.0.0:7946 (the default)".
func (l Listen) String() string {
	if l.Default {
		return l.Flag + " " + l.Addr + " (the default)"
	}
	return l.Flag + " " + l.Addr
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
// gossipAddr (--gossip-addr; gossipDefault: the flag was not given), with
// its gossip encrypted when gossipKey (--gossip-key-file): the one check
// the agent and the coordinator make, before they bind anything.
func (cfg Config) CheckDaemon(grpcAddr, gossipAddr string, gossipDefault, gossipKey bool) (warning string, err error) {
	e := cfg.Exposure(Listen{Flag: "--grpc-addr", Addr: grpcAddr}, Listen{Flag: "--gossip-addr", Addr: gossipAddr, Gossip: true, Default: gossipDefault})
	e.GossipKey = gossipKey
	return e.Check()
}

// Check applies the rule. It returns an error naming the first address
// that is not loopback and lacks a protection (mutual TLS; for gossip, a
// gossip key too), what would fix it, and what --insecure-cluster would
// expose, when the daemon has no InsecureCluster; a warning (to log at
// start and at every run) saying what is exposed when it has
// InsecureCluster: gRPC without mutual TLS (anyone who reaches it may run
// plans; on loopback, anyone on the host), gossip without a key (anyone who
// reaches it may join the cluster and read its membership); neither
// otherwise.
func (e Exposure) Check() (warning string, err error) {
	loopback := e.Loopback
	if loopback == nil {
		loopback = IsLoopbackHost
	}
	var exposed, plainGossip, grpc []Listen
	grpcExposed := false
	for _, l := range e.Listen {
		host, _, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", l.Flag, l.Addr, err)
		}
		onNet := !loopback(host)
		if !l.Gossip {
			grpc = append(grpc, l)
			grpcExposed = grpcExposed || onNet
		}
		if onNet {
			exposed = append(exposed, l)
			if l.Gossip && !e.GossipKey {
				plainGossip = append(plainGossip, l)
			}
		}
	}
	noTLS := len(exposed) > 0 && !e.TLS
	if !noTLS && len(plainGossip) == 0 {
		return "", nil
	}
	// What running unprotected exposes, as the warning and the error say it.
	var risks []string
	if noTLS {
		for _, l := range grpc {
			r := fmt.Sprintf("%s without mutual TLS: anyone who reaches %s may run plans", l, l.Flag)
			if !grpcExposed {
				r += " (it is loopback: anyone on this host)"
			}
			risks = append(risks, r)
		}
	}
	for _, l := range plainGossip {
		risks = append(risks, fmt.Sprintf("gossip on %s is unencrypted: anyone who reaches it may join the cluster and read its membership", l))
	}
	if !e.InsecureCluster {
		first := exposed[0]
		var needs []string
		if noTLS {
			needs = append(needs, fmt.Sprintf("mutual TLS (--%s, --%s, --%s)", FlagCA, FlagCert, FlagKey))
		} else {
			first = plainGossip[0]
		}
		if len(plainGossip) > 0 {
			needs = append(needs, fmt.Sprintf("a gossip key for its gossip (--%s, made by coordctl keygen)", FlagGossipKeyFile))
		}
		oneHost := ""
		if first.Gossip && !grpcExposed {
			oneHost = fmt.Sprintf("; on one host, give %s 127.0.0.1:PORT, a port of its own per member, with --local (README \"On one machine\")", first.Flag)
		}
		return "", fmt.Errorf("%s is not a loopback address: a daemon on the network needs %s (README \"Securing a cluster\")%s; or --%s to start anyway, and then %s",
			first, strings.Join(needs, " and "), oneHost, FlagInsecureCluster, strings.Join(risks, "; "))
	}
	return fmt.Sprintf("insecure cluster (--%s): %s", FlagInsecureCluster, strings.Join(risks, "; ")), nil
}

// LogAttrs returns the slog key-value pairs a daemon's start line gives
// its protection: grpc_tls (mutual TLS on its gRPC hops) and
// gossip_encryption (gossipKey: --gossip-key-file), each "on" or "off".
func (cfg Config) LogAttrs(gossipKey bool) []any {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	return []any{"grpc_tls", onOff(cfg.Mode == ModeMutualTLS), "gossip_encryption", onOff(gossipKey)}
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

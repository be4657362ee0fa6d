package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up the addresses behind a seed given as a DNS name. It is
// the part of *net.Resolver that Join and KeepJoined use (net.DefaultResolver
// by default; tests substitute their own). Both methods may be called
// concurrently and must honour ctx.
type Resolver interface {
	// LookupHost returns host's addresses (IPv4 and IPv6, as text).
	LookupHost(ctx context.Context, host string) ([]string, error)
	// LookupSRV with empty service and proto looks name up directly
	// (RFC 2782), as net.Resolver.LookupSRV does.
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// SRVScheme prefixes a seed that names a DNS SRV record
// ("dns+srv://_gossip._tcp.agents.default.svc.cluster.local"): the seed
// stands for every target of the record, at the record's port (RFC 2782).
// Kubernetes publishes one for each named port of a headless Service.
const SRVScheme = "dns+srv://"

// lookupTimeout bounds one seed's DNS lookups.
const lookupTimeout = 5 * time.Second

// resolveSeed returns the gossip addresses ("[name/]ip:port", as
// memberlist.Join takes them) that seed stands for. A seed is
// "[name/]host[:port]" (an address or a DNS name: a name stands for every
// address it resolves to; without a port, this member's gossip port) or
// SRVScheme and a record name. It is resolved anew at each call, so that a
// name whose addresses change (a replaced Kubernetes pod) is followed.
func (c *Cluster) resolveSeed(ctx context.Context, seed string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	if name, ok := strings.CutPrefix(seed, SRVScheme); ok {
		if name == "" {
			return nil, fmt.Errorf("seed %q: no record name after %s", seed, SRVScheme)
		}
		_, srvs, err := c.cfg.Resolver.LookupSRV(ctx, "", "", name)
		if err != nil {
			return nil, fmt.Errorf("seed %q: look up SRV record: %w", seed, err)
		}
		var out []string
		var errs []error
		for _, s := range srvs {
			host := strings.TrimSuffix(s.Target, ".")
			ips, err := c.lookupHost(ctx, host)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, ip := range ips {
				out = append(out, net.JoinHostPort(ip, strconv.Itoa(int(s.Port))))
			}
		}
		if len(out) == 0 {
			if len(errs) == 0 {
				return nil, fmt.Errorf("seed %q: SRV record has no target", seed)
			}
			return nil, fmt.Errorf("seed %q: %w", seed, errors.Join(errs...))
		}
		return out, nil
	}
	node, hostPort := "", seed
	if before, after, ok := strings.Cut(seed, "/"); ok {
		if before == "" {
			return nil, fmt.Errorf("seed %q: empty member name before /", seed)
		}
		node, hostPort = before+"/", after
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil { // no port: memberlist's default, this member's port
		_, ownPort, _ := net.SplitHostPort(c.addr)
		host, port = strings.Trim(hostPort, "[]"), ownPort
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("seed %q: bad port %q: want 1-65535", seed, port)
	}
	if host == "" {
		return nil, fmt.Errorf("seed %q: no host", seed)
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{node + net.JoinHostPort(ip.String(), port)}, nil
	}
	ips, err := c.lookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("seed %q: %w", seed, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, node+net.JoinHostPort(ip, port))
	}
	return out, nil
}

// lookupHost resolves host to its addresses, normalized (net.IP.String).
func (c *Cluster) lookupHost(ctx context.Context, host string) ([]string, error) {
	addrs, err := c.cfg.Resolver.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", host, err)
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			return nil, fmt.Errorf("look up %s: bad address %q", host, a)
		}
		out = append(out, ip.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("look up %s: no address", host)
	}
	return out, nil
}

// resolveSeeds resolves every seed (resolveSeed), returning the addresses
// of those that resolved and the errors of those that did not.
func (c *Cluster) resolveSeeds(ctx context.Context, seeds []string) ([]string, error) {
	var out []string
	var errs []error
	for _, s := range seeds {
		addrs, err := c.resolveSeed(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, addrs...)
	}
	return out, errors.Join(errs...)
}

// addrLive reports whether addr ("[name/]ip:port", as resolveSeed returns
// it) is a live member's gossip address.
func addrLive(addr string, live map[string]bool) bool {
	if _, after, ok := strings.Cut(addr, "/"); ok {
		addr = after
	}
	return live[addr]
}

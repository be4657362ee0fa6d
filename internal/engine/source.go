package engine

import (
	"fmt"
	"net"
)

// sourceAddrs checks the plan's source IPs (Plan.SourceIPs) on this host
// and returns them as the dialer's local addresses, port 0 (the kernel
// picks each connection's ephemeral port). An IP must be one of the host's
// addresses (a UDP socket binds to it: bind(2) refuses any other with
// EADDRNOTAVAIL) and of the family of addr, the address every connection
// dials. Errors name the IP and what to do.
func sourceAddrs(ips []string, addr string) ([]net.Addr, error) {
	if len(ips) == 0 {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	target := net.ParseIP(host)
	var out []net.Addr
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("source IP %q: not an IP address", s)
		}
		if (ip.To4() == nil) != (target.To4() == nil) {
			return nil, fmt.Errorf("source IP %s: the target %s is of the other address family: give source IPs of its family", s, host)
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort(s, "0"))
		if err != nil {
			return nil, fmt.Errorf("source IP %s: not an address of this agent's host (%w): give addresses the agent's interfaces have (ip addr), 127.0.0.0/8 on loopback", s, err)
		}
		pc.Close()
		out = append(out, &net.TCPAddr{IP: ip})
	}
	return out, nil
}

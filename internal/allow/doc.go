// Package allow owns an agent's target allowlist: its grammar (Parse), its
// default (loopback only) and the one check every share passes before the
// agent sends a packet to its target (List.Check). It is pure: it resolves
// no name and opens nothing. The engine (internal/engine) resolves the
// target and calls Check on the address it will dial; the agent maps a
// refusal to gRPC PermissionDenied.
//
// # Grammar
//
// An allowlist is a comma-separated list of entries (spaces around an
// entry are ignored; an empty entry is an error):
//
//	198.18.0.0/15        a CIDR prefix: every address in it, any port
//	127.0.0.1, ::1       one address (IPv4, or IPv6 bare or in brackets: [::1])
//	127.0.0.1:8443       one address and port; IPv6 needs brackets: [::1]:8443
//	198.18.0.0/15:443    a prefix and port; IPv6: [fd00::/8]:443
//	host.example         a host name (any port)
//	host.example:443     a host name and port
//	*.lab.example        every name under lab.example, at any depth
//	                     (a.lab.example, a.b.lab.example; not lab.example)
//	*.lab.example:443    the same, port 443 only
//
// Names are case-insensitive, a trailing dot is ignored, and labels are
// letters, digits, '-' and '_' (1 to 63 bytes each, 253 in all). '*' is
// only the whole leftmost label of a wildcard. An IPv6 zone (fe80::1%eth0)
// is refused. There is no entry that admits everything: write
// 0.0.0.0/0,::/0 to mean it.
//
// # Matching
//
// A dial is described by the name it came from (the plan's --connect-to
// host when it has one, else the URL's host; an IP literal when the URL
// names an address) and the address actually dialled after resolution.
// It is admitted when one entry admits it:
//
//   - an address entry (IP or prefix) when the dialled address is in it
//     (an IPv4-mapped IPv6 address is taken as its IPv4 address) and the
//     port matches when the entry has one;
//   - a name or wildcard entry when the name (not an IP literal) matches it
//     and the port matches when the entry has one, and the address it
//     resolved to is not loopback, link-local (169.254.0.0/16 and fe80::/10,
//     where cloud metadata services live), unspecified or multicast: those
//     are the agent's own host and its neighbours, which a name reaches
//     only by accident or through a rebound DNS answer, so they need an
//     address entry (the default has loopback's).
//
// The default, Default, is loopback only: 127.0.0.0/8 and ::1.
package allow

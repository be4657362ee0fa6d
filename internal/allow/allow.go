package allow

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultSpec is the default allowlist, loopback only.
const DefaultSpec = "127.0.0.0/8,::1"

// List is a parsed allowlist (see the package doc for its grammar and
// matching rules). The zero List admits nothing. A List is immutable and
// safe for concurrent use.
type List struct {
	entries []entry
}

type kind uint8

const (
	kindPrefix   kind = iota // prefix (one address: a full-length prefix)
	kindName                 // name
	kindWildcard             // suffix: "*." + name
)

type entry struct {
	kind   kind
	prefix netip.Prefix
	name   string // kindName: the name; kindWildcard: the suffix after "*."
	port   uint16 // 0: any port
}

// Default returns the default allowlist, DefaultSpec: 127.0.0.0/8 and ::1.
func Default() *List {
	l, err := Parse(DefaultSpec)
	if err != nil {
		panic(err) // a constant that parses
	}
	return l
}

// Parse parses a comma-separated allowlist. Errors name the entry (its
// position from 1 and its text) and what is wrong; an empty list is an
// error.
func Parse(spec string) (*List, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("allowlist is empty: list at least one CIDR, address or host name (default %s)", DefaultSpec)
	}
	l := &List{}
	for i, raw := range strings.Split(spec, ",") {
		text := strings.TrimSpace(raw)
		e, err := parseEntry(text)
		if err != nil {
			return nil, fmt.Errorf("allowlist entry %d %q: %w", i+1, text, err)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

func parseEntry(s string) (entry, error) {
	if s == "" {
		return entry{}, fmt.Errorf("empty entry (two commas, or a comma at an end)")
	}
	host, port, err := splitPort(s)
	if err != nil {
		return entry{}, err
	}
	e := entry{port: port}
	if strings.ContainsAny(host, ":/") || isIPv4ish(host) {
		p, err := parsePrefix(host)
		if err != nil {
			return entry{}, err
		}
		e.kind, e.prefix = kindPrefix, p
		return e, nil
	}
	name := host
	if strings.HasPrefix(name, "*.") {
		e.kind, name = kindWildcard, name[2:]
	} else {
		e.kind = kindName
	}
	if e.name, err = canonicalName(name); err != nil {
		return entry{}, err
	}
	return e, nil
}

// splitPort splits an entry into its host part and port (0 when none).
// A bracketed host ([::1], [fd00::/8]) may be followed by :PORT; an
// unbracketed one containing two colons is a bare IPv6 address or prefix,
// with no port.
func splitPort(s string) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if host == "" {
			return "", 0, fmt.Errorf("empty brackets")
		}
		if !strings.Contains(host, ":") {
			return "", 0, fmt.Errorf("brackets hold an IPv6 address or prefix, not %q", host)
		}
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("want :PORT after ']', got %q", rest)
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // bare IPv6: a port needs brackets
	}
	host, portText, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	if host == "" {
		return "", 0, fmt.Errorf("want a host before ':'")
	}
	port, err := parsePort(portText)
	return host, port, err
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q: want 1 to 65535", s)
	}
	return uint16(n), nil
}

// isIPv4ish reports whether s looks like a dotted-decimal address (digits
// and dots only), so that a bad address gets an address's error.
func isIPv4ish(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return s != ""
}

// parsePrefix parses an address or a CIDR prefix (IPv4-mapped IPv6 ones
// become IPv4). A prefix must have no host bits set.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "%") {
		return netip.Prefix{}, fmt.Errorf("IPv6 zones are not supported")
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an IP address: want an address such as 127.0.0.1 or ::1, or a CIDR such as 198.18.0.0/15")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR prefix: want ADDRESS/BITS such as 198.18.0.0/15 or fd00::/8")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("host bits set: did you mean %s?", p.Masked())
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("an IPv4-mapped prefix needs at least 96 bits")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// canonicalName validates a host name (RFC 1123 labels, plus '_') and
// returns it lowercased without a trailing dot.
func canonicalName(s string) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return "", fmt.Errorf("empty host name")
	}
	if len(s) > 253 {
		return "", fmt.Errorf("host name longer than 253 bytes")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return "", fmt.Errorf("empty label in host name")
		}
		if label == "*" || strings.Contains(label, "*") {
			return "", fmt.Errorf("'*' is only the whole leftmost label, as in *.lab.example")
		}
		if len(label) > 63 {
			return "", fmt.Errorf("label %q longer than 63 bytes", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q in host name: want letters, digits, '-' or '_'", string(c))
			}
		}
	}
	return s, nil
}

// String returns the list in canonical form: entries comma-separated, as
// Parse reads them (names lowercased, addresses without brackets unless
// they have a port, full-length prefixes as addresses).
func (l *List) String() string { return strings.Join(l.Entries(), ",") }

// Entries returns each entry in canonical form, in order.
func (l *List) Entries() []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.String()
	}
	return out
}

func (e entry) String() string {
	var host string
	switch e.kind {
	case kindPrefix:
		host = e.prefix.String()
		if e.prefix.IsSingleIP() {
			host = e.prefix.Addr().String()
		}
		if e.port != 0 && e.prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	case kindName:
		host = e.name
	case kindWildcard:
		host = "*." + e.name
	}
	if e.port != 0 {
		return host + ":" + strconv.Itoa(int(e.port))
	}
	return host
}

// Compact returns the canonical list cut at an entry boundary to at most
// limit bytes, and how many entries it left off (0 when whole). A cut list
// ends where a whole entry ends; with limit too small for the first entry
// it is empty.
func (l *List) Compact(limit int) (string, int) {
	entries := l.Entries()
	n := 0
	for i, e := range entries {
		add := len(e)
		if i > 0 {
			add++ // the comma
		}
		if n+add > limit {
			return strings.Join(entries[:i], ","), len(entries) - i
		}
		n += add
	}
	return strings.Join(entries, ","), 0
}

// RefusedError is a dial the allowlist does not admit.
type RefusedError struct {
	// Name is what the dial came from: a host name, or an IP literal.
	Name string
	// Addr is the address that would be dialled.
	Addr netip.AddrPort
	// Why says, when a name entry matched, why its address is not
	// admitted; empty otherwise.
	Why string
	// List is the allowlist, canonical.
	List string
}

func (e *RefusedError) Error() string {
	what := e.Addr.String()
	if e.Name != "" && e.Name != e.Addr.Addr().String() {
		what = fmt.Sprintf("%s:%d (resolved to %s)", e.Name, e.Addr.Port(), e.Addr)
	}
	msg := fmt.Sprintf("target %s is outside the allowlist %s", what, e.List)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// Check reports whether the list admits dialling addr for a target named
// name (a host name, or an IP literal when the target names an address),
// by the package doc's matching rules. Errors: *RefusedError.
func (l *List) Check(name string, addr netip.AddrPort) error {
	a := addr.Addr().Unmap()
	addr = netip.AddrPortFrom(a, addr.Port())
	host := strings.ToLower(strings.TrimSuffix(name, "."))
	isName := host != "" && !isIPLiteral(host)
	var why string
	for _, e := range l.listEntries() {
		if e.port != 0 && e.port != addr.Port() {
			continue
		}
		switch e.kind {
		case kindPrefix:
			if e.prefix.Contains(a) {
				return nil
			}
		case kindName, kindWildcard:
			if !isName || !e.matchName(host) {
				continue
			}
			if r := nameForbidden(a); r != "" {
				why = fmt.Sprintf("name entry %s matches, but %s is %s, which only an address entry admits", e, a, r)
				continue
			}
			return nil
		}
	}
	return &RefusedError{Name: name, Addr: addr, Why: why, List: l.String()}
}

func (l *List) listEntries() []entry {
	if l == nil {
		return nil
	}
	return l.entries
}

func (e entry) matchName(host string) bool {
	if e.kind == kindName {
		return host == e.name
	}
	return strings.HasSuffix(host, "."+e.name)
}

func isIPLiteral(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// nameForbidden says why a name entry may not admit a: its kind of
// address, or "" when it may.
func nameForbidden(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	return ""
}

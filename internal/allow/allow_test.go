package allow

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{DefaultSpec, "127.0.0.0/8,::1"},
		{"198.18.0.0/15,[::1],127.0.0.1,*.lab.example:443,host.example", "198.18.0.0/15,::1,127.0.0.1,*.lab.example:443,host.example"},
		{" Host.Example. , 10.0.0.1:8443 ", "host.example,10.0.0.1:8443"},
		{"[::1]:8443,[fd00::/8]:443,fd00::/8", "[::1]:8443,[fd00::/8]:443,fd00::/8"},
		{"198.18.0.0/15:443", "198.18.0.0/15:443"},
		{"::ffff:10.0.0.1,::ffff:10.0.0.0/104", "10.0.0.1,10.0.0.0/8"},
		{"0.0.0.0/0,::/0", "0.0.0.0/0,::/0"},
		{"10.0.0.1/32", "10.0.0.1"},
		{"_svc.lab-1.example", "_svc.lab-1.example"},
	} {
		l, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := l.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		again, err := Parse(l.String())
		if err != nil || again.String() != l.String() {
			t.Errorf("Parse(%q) does not read back: %v, %v", l.String(), again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "allowlist is empty"},
		{"  ", "allowlist is empty"},
		{"127.0.0.1,,::1", `entry 2 "": empty entry`},
		{"127.0.0.1,", `entry 2 "": empty entry`},
		{"10.0.0.300", `entry 1 "10.0.0.300": not an IP address`},
		{"10.0.0.1/33", `not a CIDR prefix`},
		{"10.0.0.1/8", `host bits set: did you mean 10.0.0.0/8?`},
		{"host.example:0", `port "0": want 1 to 65535`},
		{"host.example:99999", `port "99999"`},
		{"host.example:https", `port "https"`},
		{"[::1", `missing ']'`},
		{"[::1]8443", `want :PORT after ']'`},
		{"[host.example]:443", `brackets hold an IPv6 address`},
		{"fe80::1%eth0", `IPv6 zones are not supported`},
		{"*", `'*' is only the whole leftmost label`},
		{"a.*.example", `'*' is only the whole leftmost label`},
		{"*.", `empty host name`},
		{"a..example", `empty label`},
		{"host example", `" " in host name`},
		{":443", `want a host before ':'`},
		{strings.Repeat("a", 64) + ".example", `longer than 63 bytes`},
		{"ok.example,bad_entry!", `entry 2 "bad_entry!": "!" in host name`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	l, err := Parse("198.18.0.0/15,[::1]:8443,127.0.0.1:443,*.lab.example:443,host.example,10.1.0.0/16:80")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name, addr string
		ok         bool
		why        string
	}{
		{"198.18.0.5", "198.18.0.5:8443", true, ""},
		{"198.19.255.255", "198.19.255.255:1", true, ""},
		{"198.20.0.1", "198.20.0.1:443", false, ""},
		{"anything.example", "198.18.1.1:443", true, ""}, // the address entry admits it
		{"::1", "[::1]:8443", true, ""},
		{"::1", "[::1]:8444", false, ""},
		{"127.0.0.1", "127.0.0.1:443", true, ""},
		{"127.0.0.1", "127.0.0.1:444", false, ""},
		{"127.0.0.1", "[::ffff:127.0.0.1]:443", true, ""},
		{"a.lab.example", "203.0.113.7:443", true, ""},
		{"A.B.Lab.Example.", "203.0.113.7:443", true, ""},
		{"lab.example", "203.0.113.7:443", false, ""},
		{"xlab.example", "203.0.113.7:443", false, ""},
		{"a.lab.example", "203.0.113.7:8443", false, ""},
		{"host.example", "203.0.113.8:1234", true, ""},
		{"sub.host.example", "203.0.113.8:1234", false, ""},
		{"203.0.113.8", "203.0.113.8:1234", false, ""}, // an IP literal never matches a name entry
		{"host.example", "127.0.0.2:1234", false, "127.0.0.2 is a loopback address"},
		{"host.example", "169.254.169.254:80", false, "a link-local address"},
		{"host.example", "0.0.0.0:80", false, "the unspecified address"},
		{"host.example", "[fe80::1]:80", false, "a link-local address"},
		{"host.example", "224.0.0.1:80", false, "a multicast address"},
		{"x", "10.1.2.3:80", true, ""},
		{"x", "10.1.2.3:81", false, ""},
	} {
		err := l.Check(tc.name, ap(tc.addr))
		if tc.ok {
			if err != nil {
				t.Errorf("Check(%q, %s) = %v, want admitted", tc.name, tc.addr, err)
			}
			continue
		}
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("Check(%q, %s) = %v, want a *RefusedError", tc.name, tc.addr, err)
			continue
		}
		if !strings.Contains(err.Error(), l.String()) || !strings.Contains(err.Error(), re.Addr.String()) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("Check(%q, %s) = %q, want the address, the list and %q", tc.name, tc.addr, err, tc.why)
		}
	}
}

func TestDefaultIsLoopbackOnly(t *testing.T) {
	d := Default()
	for _, a := range []string{"127.0.0.1:443", "127.255.0.9:1", "[::1]:443"} {
		if err := d.Check("localhost", netip.MustParseAddrPort(a)); err != nil {
			t.Errorf("Default().Check(localhost, %s) = %v, want admitted", a, err)
		}
	}
	for _, a := range []string{"128.0.0.1:443", "10.0.0.1:443", "198.18.0.1:443", "[::2]:443", "0.0.0.0:443"} {
		if err := d.Check("example.com", netip.MustParseAddrPort(a)); err == nil {
			t.Errorf("Default().Check(example.com, %s) admitted, want refused", a)
		}
	}
	var zero List
	if err := zero.Check("127.0.0.1", netip.MustParseAddrPort("127.0.0.1:1")); err == nil {
		t.Error("the zero List admitted a dial")
	}
}

func TestRefusedErrorText(t *testing.T) {
	l, _ := Parse("127.0.0.2")
	err := l.Check("target.example", netip.MustParseAddrPort("10.0.0.1:443"))
	want := "target target.example:443 (resolved to 10.0.0.1:443) is outside the allowlist 127.0.0.2"
	if err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	err = l.Check("10.0.0.1", netip.MustParseAddrPort("10.0.0.1:443"))
	want = "target 10.0.0.1:443 is outside the allowlist 127.0.0.2"
	if err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestCompact(t *testing.T) {
	l, _ := Parse("10.0.0.0/8,host.example,*.lab.example:443")
	for _, tc := range []struct {
		limit   int
		want    string
		omitted int
	}{
		{100, "10.0.0.0/8,host.example,*.lab.example:443", 0},
		{41, "10.0.0.0/8,host.example,*.lab.example:443", 0},
		{40, "10.0.0.0/8,host.example", 1},
		{23, "10.0.0.0/8,host.example", 1},
		{22, "10.0.0.0/8", 2},
		{9, "", 3},
	} {
		got, omitted := l.Compact(tc.limit)
		if got != tc.want || omitted != tc.omitted {
			t.Errorf("Compact(%d) = %q, %d; want %q, %d", tc.limit, got, omitted, tc.want, tc.omitted)
		}
	}
}

// FuzzParse feeds Parse arbitrary text: it must never panic; whatever it
// accepts reads back from its canonical form to the same list, and Check
// answers for any address without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		DefaultSpec, "198.18.0.0/15,[::1],127.0.0.1,*.lab.example:443,host.example",
		"[fd00::/8]:443", "::ffff:10.0.0.0/104", "a..b", "[", "]:1", "*.*", "1.2.3.4:65536", ",",
	} {
		f.Add(s, "a.lab.example", []byte{127, 0, 0, 1}, uint16(443))
	}
	f.Fuzz(func(t *testing.T, spec, name string, ip []byte, port uint16) {
		l, err := Parse(spec)
		if err != nil {
			if l != nil {
				t.Fatalf("Parse(%q) returned a list and an error", spec)
			}
			return
		}
		canon := l.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canon, spec, err)
		}
		if again.String() != canon {
			t.Fatalf("canonical %q reads back as %q", canon, again.String())
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		addr := netip.AddrPortFrom(a, port)
		e1, e2 := l.Check(name, addr), again.Check(name, addr)
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("%q and its canonical form %q disagree on %q %s: %v vs %v", spec, canon, name, addr, e1, e2)
		}
	})
}

package engine

import (
	"strings"
	"testing"
)

// TestSourceAddrs: loopback addresses of the target's family are taken;
// an address this host lacks (TEST-NET-1, RFC 5737) and one of the other
// family are refused, named, with what to do.
func TestSourceAddrs(t *testing.T) {
	got, err := sourceAddrs([]string{"127.0.0.2", "127.0.0.3"}, "127.0.0.1:443")
	if err != nil || len(got) != 2 || got[1].String() != "127.0.0.3:0" {
		t.Fatalf("sourceAddrs = %v, %v: want 127.0.0.2:0, 127.0.0.3:0", got, err)
	}
	for _, c := range []struct{ ip, want string }{
		{"192.0.2.1", "source IP 192.0.2.1: not an address of this agent's host"},
		{"::1", "source IP ::1: the target 127.0.0.1 is of the other address family"},
	} {
		if _, err := sourceAddrs([]string{c.ip}, "127.0.0.1:443"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sourceAddrs(%s) = %v, want %q", c.ip, err, c.want)
		}
	}
}

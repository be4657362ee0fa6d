package cluster

import "testing"

// TestListenAddr: a logged listen address keeps the host as configured
// (0.0.0.0 is every address: not the advertised address, nor Go's [::])
// and takes the bound port.
func TestListenAddr(t *testing.T) {
	for _, c := range []struct{ configured, want string }{
		{"0.0.0.0:0", "0.0.0.0:17202"},
		{"0.0.0.0:17202", "0.0.0.0:17202"},
		{"[::]:0", "[::]:17202"},
		{"127.0.0.1:0", "127.0.0.1:17202"},
		{":0", ":17202"},
	} {
		if got := ListenAddr(c.configured, 17202); got != c.want {
			t.Errorf("ListenAddr(%q, 17202) = %q, want %q", c.configured, got, c.want)
		}
	}
}

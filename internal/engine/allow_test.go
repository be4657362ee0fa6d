package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/plan"
)

// countingListener accepts and counts TCP connections on loopback,
// closing each at once.
func countingListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), &n
}

func allowList(t *testing.T, spec string) *allow.List {
	t.Helper()
	l, err := allow.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAllowRefusesBeforeAnyPacket: a share whose dial address (the URL's,
// --connect-to's, or a name's resolved one) is outside the allowlist is
// refused by New with an *allow.RefusedError naming it, and nothing reaches
// the target; one inside it is admitted and dials the checked address.
func TestAllowRefusesBeforeAnyPacket(t *testing.T) {
	addr, accepts := countingListener(t)
	_, port, _ := net.SplitHostPort(addr)
	fakeDNS := func(names map[string][]string) func(context.Context, string) ([]string, error) {
		return func(_ context.Context, host string) ([]string, error) {
			if a, ok := names[host]; ok {
				return a, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		}
	}
	for _, tc := range []struct {
		name      string
		p         plan.Plan
		allow     string
		dns       map[string][]string
		want      string // the error's text, or "" when admitted
		wantAddr  string // the address dialled when admitted
		wantMatch string // more of the error
	}{
		{name: "url outside", p: plan.Plan{URL: "http://" + addr + "/"}, allow: "127.0.0.2",
			want: "target 127.0.0.1:" + port + " is outside the allowlist 127.0.0.2"},
		{name: "url inside", p: plan.Plan{URL: "http://" + addr + "/"}, allow: "127.0.0.1:" + port, wantAddr: addr},
		{name: "connect-to outside", p: plan.Plan{URL: "http://127.0.0.2:" + port + "/", ConnectTo: addr}, allow: "127.0.0.2",
			want: "target 127.0.0.1:" + port + " is outside the allowlist 127.0.0.2"},
		{name: "connect-to name outside", p: plan.Plan{URL: "http://a.lab.example:" + port + "/", ConnectTo: "other.example:" + port},
			allow: "*.lab.example", dns: map[string][]string{"a.lab.example": {"198.18.0.9"}, "other.example": {"198.18.0.9"}},
			want: "target other.example:" + port + " (resolved to 198.18.0.9:" + port + ") is outside the allowlist *.lab.example"},
		{name: "name resolved outside", p: plan.Plan{URL: "http://target.example:" + port + "/"}, allow: "198.18.0.0/15",
			dns:  map[string][]string{"target.example": {"203.0.113.1"}},
			want: "target target.example:" + port + " (resolved to 203.0.113.1:" + port + ") is outside the allowlist 198.18.0.0/15"},
		{name: "name entry, loopback answer", p: plan.Plan{URL: "http://a.lab.example:" + port + "/"}, allow: "*.lab.example",
			dns: map[string][]string{"a.lab.example": {"127.0.0.1"}}, want: "is outside the allowlist *.lab.example: name entry *.lab.example matches, but 127.0.0.1 is a loopback address"},
		{name: "name, second answer admitted", p: plan.Plan{URL: "http://localhost:" + port + "/"}, allow: "127.0.0.1",
			dns: map[string][]string{"localhost": {"::1", "127.0.0.1"}}, wantAddr: addr},
		{name: "name, no answer admitted", p: plan.Plan{URL: "http://localhost:" + port + "/"}, allow: "127.0.0.2",
			dns: map[string][]string{"localhost": {"::1", "127.0.0.1"}}, want: "is outside the allowlist 127.0.0.2", wantMatch: "localhost resolved to ::1, 127.0.0.1, none admitted"},
		{name: "mix outside", p: plan.Plan{URL: "http://" + addr + "/", Mix: []plan.Request{{Method: "GET", URL: "http://" + addr + "/a", Weight: 1}, {Method: "GET", URL: "http://" + addr + "/b", Weight: 2}}},
			allow: "10.0.0.0/8", want: "target 127.0.0.1:" + port + " is outside the allowlist 10.0.0.0/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Duration = time.Second
			p.SetDefaults()
			share := plan.Shares("t", p, 1)[0]
			cfg := Config{Share: share, Workers: 1, Allow: allowList(t, tc.allow)}
			if tc.dns != nil {
				cfg.LookupHost = fakeDNS(tc.dns)
			}
			e, err := New(context.Background(), cfg)
			if tc.want != "" {
				var re *allow.RefusedError
				if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.wantMatch) {
					t.Fatalf("New = %v, want an *allow.RefusedError with %q %q", err, tc.want, tc.wantMatch)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer e.Close()
			if e.Addr() != tc.wantAddr {
				t.Errorf("Addr() = %s, want %s", e.Addr(), tc.wantAddr)
			}
		})
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("target accepted %d connections, want 0: New must not dial", n)
	}
}

// TestAllowChecksResolverFirst: a plan's DNS server outside the allowlist
// is refused before it is sent a query.
func TestAllowChecksResolverFirst(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p := plan.Plan{URL: "http://target.example/", Resolver: pc.LocalAddr().String(), Duration: time.Second}
	p.SetDefaults()
	_, err = New(context.Background(), Config{Share: plan.Shares("t", p, 1)[0], Workers: 1, Allow: allowList(t, "198.18.0.0/15")})
	var re *allow.RefusedError
	if err == nil || !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "resolver: target "+pc.LocalAddr().String()) {
		t.Fatalf("New = %v, want the resolver refused", err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _, err := pc.ReadFrom(make([]byte, 512)); err == nil {
		t.Errorf("the refused resolver got a %d-byte query", n)
	}
}

// TestNewRefusesInconsistentShare: a share whose stage targets do not fit
// its plan (too few: this panicked in the schedule; too large: it
// allocated a slot per connection asked) is an error, not a crash.
func TestNewRefusesInconsistentShare(t *testing.T) {
	p := plan.Plan{URL: "http://127.0.0.1:1/", Connections: 2, Stages: []plan.Stage{{Duration: time.Second, Connections: 4}, {Duration: time.Second, Connections: 1}}}
	p.SetDefaults()
	for _, tc := range []struct {
		targets []int64
		want    string
	}{
		{[]int64{4}, "share has 1 stage targets for the plan's 2 stages"},
		{[]int64{1 << 40, 1}, "share's stage 0 target 1099511627776: want 0 to the plan's 4"},
		{[]int64{4, -1}, "share's stage 1 target -1"},
	} {
		s := plan.Shares("t", p, 1)[0]
		s.StageTargets = tc.targets
		e, err := New(context.Background(), Config{Share: s, Workers: 1})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			if e != nil {
				e.Close()
			}
			t.Errorf("New with stage targets %v = %v, want %q", tc.targets, err, tc.want)
		}
	}
}

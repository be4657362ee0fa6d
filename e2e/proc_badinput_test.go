package e2e

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestProcBadInput runs coordctl with bad command lines and against broken
// clusters: each must exit with the documented status (2 for bad usage, 1
// for any other error) and a clear "coordctl: ..." message on stderr,
// never a panic.
func TestProcBadInput(t *testing.T) {
	// Port 1 on loopback is closed (binding it needs privileges nobody
	// uses it for here); check it, since two cases rely on it.
	const closed = "127.0.0.1:1"
	if conn, err := net.DialTimeout("tcp", closed, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s accepts connections; the test needs it closed", closed)
	}

	empty := startProcCoordinator(t) // a coordinator without agents
	withAgent := startProcCluster(t, 1)
	env := procEnv()

	type tc struct {
		name    string
		env     []string // default procEnv()
		args    []string
		code    int
		want    []string // each must appear in stderr (case-insensitive)
		wantAny []string // one of these must appear, if not empty
		after   func(t *testing.T)
	}
	cases := []tc{
		// Usage errors: exit 2, before any contact with the coordinator
		// (which is unreachable here, so a missing check exits 1).
		{name: "unknown flag", args: []string{"--coordinator", closed, "run", "--bogus", "https://127.0.0.1:8443/"},
			code: 2, want: []string{"unknown flag", "--bogus"}},
		{name: "malformed URL", args: []string{"--coordinator", closed, "run", "-c", "1", "-d", "1", "ht!tp://x"},
			code: 2, want: []string{"url", "ht!tp://x"}},
		{name: "URL without scheme", args: []string{"--coordinator", closed, "run", "-c1", "-d1", "127.0.0.1:8443"},
			code: 2, want: []string{"url", "127.0.0.1:8443"}},
		{name: "ftp scheme", args: []string{"--coordinator", closed, "run", "-c1", "-d1", "ftp://127.0.0.1/"},
			code: 2, want: []string{"scheme", "ftp"}},
		{name: "zero connections", args: []string{"--coordinator", closed, "run", "-c", "0", "-d", "1", "https://127.0.0.1:8443/"},
			code: 2, want: []string{"connections"}},
		{name: "bad duration", args: []string{"--coordinator", closed, "run", "-c1", "-d", "soon", "https://127.0.0.1:8443/"},
			code: 2, want: []string{"duration", "soon"}},
		{name: "no URL", args: []string{"--coordinator", closed, "run", "-c1", "-d1"},
			code: 2, want: []string{"url"}},

		// Errors: exit 1.
		{name: "unreachable coordinator agents", args: []string{"--coordinator", closed, "agents"},
			code: 1, want: []string{"unreachable", closed}},
		{name: "unreachable coordinator run", args: []string{"--coordinator", closed, "run", "-c1", "-d1s", "https://" + closed + "/"},
			code: 1, want: []string{"unreachable", closed}},
		{name: "unreachable coordinator from env", env: procEnv("PHALANX_COORDINATOR=127.0.0.1:2"), args: []string{"agents"},
			code: 1, want: []string{"unreachable", "127.0.0.1:2"}},
		{name: "missing CA file", args: []string{"--coordinator", withAgent.grpcAddr, "run", "-c1", "-d1s", "--cacert", "/nonexistent/ca.pem", "https://" + closed + "/"},
			code: 2, want: []string{"--cacert", "/nonexistent/ca.pem"}}, // a bad command line (README exit statuses)
		{name: "no agents alive", args: []string{"--coordinator", empty.grpcAddr, "run", "-c1", "-d1s", "https://" + closed + "/"},
			code: 1, want: []string{"no agents"}},
		{name: "more agents than alive", args: []string{"--coordinator", withAgent.grpcAddr, "run", "-c4", "-d1s", "--agents", "3", "https://" + closed + "/"},
			code: 1, want: []string{"agents"}},
		{name: "unreachable target", args: []string{"--coordinator", withAgent.grpcAddr, "run", "-c1", "-d1s", "https://" + closed + "/"},
			code: 1, wantAny: []string{"connect", "refused"},
			// A failed prepare releases the agent for the next run.
			after: func(t *testing.T) { withAgent.waitIdle(t) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.env
			if e == nil {
				e = env
			}
			began := time.Now()
			stdout, stderr, code := runCoordctl(t, 20*time.Second, e, c.args...)
			t.Logf("coordctl %s: exit %d in %v: %s", strings.Join(c.args, " "), code, time.Since(began).Round(time.Millisecond), strings.TrimSpace(stderr))
			if code != c.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout, stderr)
			}
			for _, s := range []string{"panic", "goroutine "} {
				if strings.Contains(stderr, s) || strings.Contains(stdout, s) {
					t.Errorf("output contains %q\nstdout:\n%s\nstderr:\n%s", s, stdout, stderr)
				}
			}
			if !strings.HasPrefix(stderr, "coordctl: ") {
				t.Errorf("stderr does not start with \"coordctl: \":\n%s", stderr)
			}
			low := strings.ToLower(stderr)
			for _, w := range c.want {
				if !strings.Contains(low, strings.ToLower(w)) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
			if len(c.wantAny) > 0 && !containsAny(low, c.wantAny) {
				t.Errorf("stderr mentions none of %q:\n%s", c.wantAny, stderr)
			}
			if strings.Contains(stdout, "Requests/sec:") {
				t.Errorf("a failed run printed a report:\n%s", stdout)
			}
			if c.after != nil {
				c.after(t)
			}
		})
	}

	// With no agents, "coordctl agents" succeeds and says so.
	t.Run("agents none alive", func(t *testing.T) {
		stdout, stderr, code := runCoordctl(t, 10*time.Second, env, "--coordinator", empty.grpcAddr, "agents")
		if code != 0 || !strings.Contains(stdout, "NAME") || !strings.Contains(stderr, "no agents alive") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}

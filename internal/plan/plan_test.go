package plan

import (
	"strings"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		total, n int
		want     []int
	}{
		{10, 1, []int{10}},
		{10, 3, []int{4, 3, 3}},
		{2, 3, []int{1, 1, 0}},
		{750, 8, []int{94, 94, 94, 94, 94, 94, 93, 93}},
		{0, 2, []int{0, 0}},
		{5, 0, nil},
	} {
		got := Split(tc.total, tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("Split(%v, %d) = %v, want %v", tc.total, tc.n, got, tc.want)
			continue
		}
		sum := 0
		for i := range got {
			sum += got[i]
			if got[i] != tc.want[i] {
				t.Errorf("Split(%v, %d) = %v, want %v", tc.total, tc.n, got, tc.want)
				break
			}
		}
		if tc.n > 0 && sum != tc.total {
			t.Errorf("Split(%v, %d) sums to %d", tc.total, tc.n, sum)
		}
	}
}

func TestValidate(t *testing.T) {
	base := func() Plan {
		p := Plan{URL: "https://127.0.0.1:8443/"}
		p.SetDefaults()
		return p
	}
	if err := (func() *Plan { p := base(); return &p })().Validate(); err != nil {
		t.Fatalf("valid plan: %v", err)
	}
	paced := base()
	paced.Load, paced.Rate, paced.PacingWindow, paced.PacingSpin = OpenLoop, 2000, time.Millisecond, true
	if err := paced.Validate(); err != nil {
		t.Fatalf("open loop with a 1-ms pacing window and the spin: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Plan)
		want   string
	}{
		{"no scheme", func(p *Plan) { p.URL = "127.0.0.1:8443" }, `url = "127.0.0.1:8443"`},
		{"ftp", func(p *Plan) { p.URL = "ftp://x/" }, `scheme "ftp" not supported: want https or http`},
		{"no host", func(p *Plan) { p.URL = "https:///x" }, "want a host"},
		{"space in query", func(p *Plan) { p.URL = "https://127.0.0.1/x?q=a b" }, "a space in the query: escape it as %20 or +"},
		{"zero conns", func(p *Plan) { p.Connections = 0 }, "connections = 0: want at least 1"},
		{"neg duration", func(p *Plan) { p.Duration = -time.Second }, "duration = -1s"},
		{"zero timeout", func(p *Plan) { p.Timeout = 0 }, "timeout = 0s"},
		{"bad method", func(p *Plan) { p.Method = "GE T" }, `method = "GE T"`},
		{"bad header", func(p *Plan) { p.Headers = []Header{{"X Y", "z"}} }, "headers[0]"},
		{"agents > conns", func(p *Plan) { p.Connections = 2; p.Agents = 3 }, "agents = 3: want at most connections (2)"},
		{"too long", func(p *Plan) { p.Duration = 30 * time.Hour }, "duration + timeout must be at most 23h0m0s"},
		{"pacing window closed loop", func(p *Plan) { p.PacingWindow = time.Millisecond }, "pacing_window = 1ms: a closed-loop plan has no schedule to bunch"},
		{"pacing spin closed loop", func(p *Plan) { p.PacingSpin = true }, "pacing_spin = true: a closed-loop plan has no intended send times to spin to"},
		{"pacing window too long", func(p *Plan) { p.Load, p.Rate, p.PacingWindow = OpenLoop, 100, 20*time.Millisecond }, "pacing_window = 20ms: want 0"},
		{"pacing window below a microsecond", func(p *Plan) { p.Load, p.Rate, p.PacingWindow = OpenLoop, 100, time.Nanosecond }, "pacing_window = 1ns: want whole microseconds"},
		{"pacing window negative", func(p *Plan) { p.Load, p.Rate, p.PacingWindow = OpenLoop, 100, -time.Millisecond }, "pacing_window = -1ms: want 0"},
		{"pacing window off the duration", func(p *Plan) {
			p.Load, p.Rate, p.PacingWindow, p.Duration = OpenLoop, 100, 2*time.Millisecond, 1001*time.Millisecond
		}, "pacing_window = 2ms: want a divisor of the duration (1.001s), e.g. 1ms"},
		{"pacing window off the interval", func(p *Plan) {
			p.Load, p.Rate, p.PacingWindow = OpenLoop, 100, 3*time.Millisecond
		}, "pacing_window = 3ms: want a divisor of the interval (1s), e.g. 1ms,"},
		{"pacing window off the warm-up", func(p *Plan) {
			p.Load, p.Rate, p.PacingWindow, p.Warmup = OpenLoop, 100, time.Millisecond, 1500*time.Microsecond
		}, "pacing_window = 1ms: want a divisor of the warm-up (1.5ms), e.g. 500µs"},
	} {
		p := base()
		tc.mutate(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Target
	}{
		{"https://example.test/a?b=1", Target{TLS: true, Host: "example.test", Port: "443", HostHeader: "example.test", RequestURI: "/a?b=1"}},
		{"https://example.test:443/", Target{TLS: true, Host: "example.test", Port: "443", HostHeader: "example.test", RequestURI: "/"}},
		{"https://127.0.0.1:8443", Target{TLS: true, Host: "127.0.0.1", Port: "8443", HostHeader: "127.0.0.1:8443", RequestURI: "/"}},
		{"http://[::1]:8080/x", Target{Host: "::1", Port: "8080", HostHeader: "[::1]:8080", RequestURI: "/x"}},
		{"https://127.0.0.1/a b?c=%20", Target{TLS: true, Host: "127.0.0.1", Port: "443", HostHeader: "127.0.0.1", RequestURI: "/a%20b?c=%20"}},
	} {
		got, err := ParseTarget(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	// wrk's users type host:port/path: the error gives the https URL
	// meant, its credentials redacted.
	for in, want := range map[string]string{
		"127.0.0.1:8443":             "no scheme: want an absolute URL such as https://127.0.0.1:8443 (or http://)",
		"//127.0.0.1/x?api_key=s3cr": "no scheme: want an absolute URL such as https://127.0.0.1/x?api_key=" + RedactedValue + " (or http://)",
		"localhost:8443/":            "no scheme: want an absolute URL such as https://localhost:8443/ (or http://)",
		"example.test/x":             "no scheme: want an absolute URL such as https://example.test/x (or http://)",
		"https:/127.0.0.1/":          "want a host, e.g. https://127.0.0.1:8443/",
	} {
		if _, err := ParseTarget(in); err == nil || err.Error() != want {
			t.Errorf("ParseTarget(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestShares: rates, connections, counts and stage targets split across
// agents, then each agent's part across its workers, sum exactly: no agent
// or worker loses a fractional share.
func TestShares(t *testing.T) {
	for _, tc := range []struct {
		p       Plan
		agents  int
		workers int
	}{
		{Plan{Load: OpenLoop, Connections: 750, Rate: 20001, MaxConnections: 1001, Requests: 500_003, Stages: []Stage{{Rate: 7}, {Rate: 99_999}}}, 3, 8},
		{Plan{Load: OpenLoop, Connections: 5, Rate: 3, MaxConnections: 5}, 4, 2},
		{Plan{Connections: 16, Stages: []Stage{{Connections: 33}, {Connections: 0}}}, 2, 3},
	} {
		shares := Shares("r", tc.p, tc.agents)
		var conns, rate, maxc int
		var reqs int64
		stages := make([]int64, len(tc.p.Stages))
		var workerRate int
		for _, s := range shares {
			conns += s.Connections
			rate += int(s.Rate)
			maxc += s.MaxConnections
			reqs += s.Requests
			for i, v := range s.StageTargets {
				stages[i] += v
			}
			for w := range tc.workers {
				workerRate += Part(int(s.Rate), tc.workers, w)
			}
		}
		if conns != tc.p.Connections || rate != int(tc.p.Rate) || maxc != tc.p.MaxConnections || reqs != tc.p.Requests || workerRate != int(tc.p.Rate) {
			t.Errorf("Shares(%+v, %d): conns %d rate %d (workers %d) max %d requests %d", tc.p, tc.agents, conns, rate, workerRate, maxc, reqs)
		}
		for i, st := range tc.p.Stages {
			want := int64(st.Connections)
			if tc.p.OpenLoop() {
				want = st.Rate
			}
			if stages[i] != want {
				t.Errorf("Shares(%+v, %d): stage %d targets sum to %d, want %d", tc.p, tc.agents, i, stages[i], want)
			}
		}
	}
}

package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// TestExamplePlans parses and validates every plan in examples/plans, so
// the documented examples stay valid.
func TestExamplePlans(t *testing.T) {
	files, err := filepath.Glob("../../examples/plans/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("example plans: %v, %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseFile(data, os.ReadFile)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		p.SetDefaults()
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseFile(t *testing.T) {
	in := `
url: https://app.test:8443/
rate: 1000
pacing_window: 500us
pacing_spin: true
connections: 20
duration: 90
warmup: 5s
keepalive: false
headers: ["Accept-Encoding: br", "X-A: 1, 2"]
body_file: body.txt
tls:
  resume: true
  ca_file: certs/ca.pem
  ciphers: [ECDHE-RSA-AES128-GCM-SHA256]
stages:
  - duration: 30s
    rate: 2000
  - {duration: 60, rate: 2000}
mix:
  - {url: "https://app.test:8443/a", weight: 3}
  - {method: POST, url: "https://app.test:8443/b", headers: ["Content-Type: text/plain"], body_file: body.txt}
`
	ca, err := tlsgen.New("app.test")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"body.txt": "hello", "certs/ca.pem": string(ca.CAPEM)}
	p, err := ParseFile([]byte(in), readFiles(files))
	if err != nil {
		t.Fatal(err)
	}
	if string(p.TLS.CAPEM) != string(ca.CAPEM) || p.TLS.CAFile != "certs/ca.pem" {
		t.Errorf("ParseFile: tls.ca_file read %q, named %q; want the CA's PEM, named certs/ca.pem as written", p.TLS.CAPEM, p.TLS.CAFile)
	}
	// A CA file without a PEM certificate is refused, named.
	files["certs/ca.pem"] = "not a certificate"
	if _, err := ParseFile([]byte(in), readFiles(files)); err == nil || !strings.Contains(err.Error(), "tls.ca_file certs/ca.pem: holds no PEM certificate") {
		t.Errorf("ParseFile with a CA file of no PEM: %v, want tls.ca_file certs/ca.pem named", err)
	}
	if p.Rate != 1000 || p.PacingWindow != 500*time.Microsecond || !p.PacingSpin || p.Connections != 20 || p.Duration != 90*time.Second || p.Warmup != 5*time.Second || !p.NoKeepAlive ||
		string(p.Body) != "hello" || !p.TLS.Resume || len(p.Stages) != 2 || p.Stages[1].Duration != time.Minute ||
		len(p.Mix) != 2 || p.Mix[0].Weight != 3 || string(p.Mix[1].Body) != "hello" || p.Headers[1].Value != "1, 2" {
		t.Fatalf("ParseFile = %+v", p)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"url: https://x/\nconections: 5", `line 2: unknown field "conections"; did you mean "connections"?`},
		{"url: https://x/\nresume: true", `line 2: unknown field "resume"; did you mean "tls.resume"?`},
		{"url: https://x/\nfrobnicate: 1", `line 2: unknown field "frobnicate"`},
		{"tls: 5", "line 1: cannot unmarshal !!int `5` into a mapping"},
		{"", "empty plan"},
		{"duration: soon", `"soon": want a duration such as 10s`},
		{"url: https://x/\nduration: 0s", `duration = 0s: want more than 0`},
		{"url: https://x/\nduration: 0", `duration = 0s: want more than 0`},
		{"headers: [nocolon]", `headers[0] = "nocolon": want 'Name: value'`},
		{"body_file: missing.txt", "body_file: open missing.txt"},
		{"url: [", "line 1: did not find expected node content"},
		// The YAML parser's own problems are counted from line 1, as its
		// scanner's are (the library prints them 0-based).
		{"url: https://x/\nconnections: [10\n", "line 2: did not find expected ',' or ']'"},
		{"url: https://x/\nconnections: [10", "line 2: did not find expected ',' or ']'"},
		{"url: https://x/\nconnections: 10\nheaders: {a: 1\n\n", "line 3: did not find expected ',' or '}'"},
		{"url: https://x/\nheaders:\n  - 'a: b'\n - 'c: d'\n", "line 4: did not find expected key"},
		{"url: https://x/\nconnections: 10\n  duration: 1s\n", "line 3: mapping values are not allowed in this context"},
		{"url: https://x/\n\tconnections: 3\n", "line 2: found a tab character that violates indentation"},
		// An unknown field and a bad scalar: both named, the unknown field first.
		{"hello: world\nurl: https://x/\nrate: fast\n", "line 1: unknown field \"hello\"\nline 3: rate \"fast\": not a number"},
	} {
		_, err := ParseFile([]byte(tc.in), readFiles(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFile(%q) = %v, want error containing %q", tc.in, err, tc.want)
		} else if strings.Contains(err.Error(), "plan.File") || strings.Contains(err.Error(), "plan.file") || strings.Contains(err.Error(), "yaml:") {
			t.Errorf("ParseFile(%q) = %v, naming a Go type or the YAML package", tc.in, err)
		}
	}
}

// TestValidateStages: a bad plan's error names the field, the value and
// what is allowed.
func TestValidateStages(t *testing.T) {
	for _, tc := range []struct {
		p    Plan
		want string
	}{
		{Plan{URL: "https://x/", Load: OpenLoop, Rate: 100, Stages: []Stage{{Duration: 1500 * time.Millisecond, Rate: 200}}}, "stages[0].duration = 1.5s: want a multiple of the interval (1s)"},
		{Plan{URL: "https://x/", Load: OpenLoop, Rate: 100, Stages: []Stage{{Duration: time.Second, Connections: 5}}}, "stages[0].connections = 5: an open-loop plan (rate) ramps rate"},
		{Plan{URL: "https://x/", Load: OpenLoop, Stages: []Stage{{Duration: time.Second, Rate: 5}}, Connections: 2}, ""},
		{Plan{URL: "https://x/", Connections: 2, Stages: []Stage{{Duration: time.Second, Connections: 5}}, Duration: 3 * time.Second}, "duration = 3s: want the stages' total (1s)"},
		{Plan{URL: "https://x/", Connections: 5, MaxConnections: 10}, "max_connections = 10: only open-loop runs"},
		{Plan{URL: "https://x/", Rate: -1}, "rate = -1: want a rate above 0 requests/s, or 0 for closed loop"},
	} {
		p := tc.p
		p.SetDefaults()
		err := p.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("Validate(%+v) = %v, want ok", tc.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// FuzzParseFile: the YAML plan parser (plans come from users and, through
// the coordinator's API, from other machines) never panics, and what it
// accepts survives SetDefaults and Validate without panicking either.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"url: https://127.0.0.1:8443/\n",
		"url: https://x/\nrate: 1000\nconnections: 20\nstages:\n  - duration: 30s\n    rate: 2000\n  - {duration: 60, rate: 2000}\n",
		"url: https://x/\nhttp2: true\nmax_streams: 10\ntls: {insecure: true, alpn: [h2]}\n",
		"url: https://x/\nmix:\n  - {method: POST, url: https://x/a, headers: [\"A: b\"], weight: 3}\n",
		"url: https://x/\ncps: 500\nrequests_per_connection: 0\nmax_open: 800\nclose: rst\nsource_ips: [127.0.0.2]\ntls: {resume_ratio: 0.7}\nstages:\n  - {duration: 2s, cps: 900}\n",
		"conections: 3\n",
		"duration: 1.5\nwarmup: 2s\nkeepalive: false\n",
		"- a\n",
		"url: [\n",
	} {
		f.Add([]byte(s))
	}
	read := func(name string) ([]byte, error) { return []byte("file " + name), nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseFile(data, read)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseFile(%q): empty error", data)
			}
			return
		}
		if p.Load != LoadFor(p.Rate, p.Stages) {
			t.Fatalf("ParseFile(%q): load %v, want %v", data, p.Load, LoadFor(p.Rate, p.Stages))
		}
		p.SetDefaults()
		_ = p.Validate()
	})
}

// TestOnAgentLoss: the plan file's on_agent_loss is abort by default,
// takes continue, and names the field and the allowed values otherwise;
// an unknown policy value fails validation.
func TestOnAgentLoss(t *testing.T) {
	for _, c := range []struct {
		in   string
		want LossPolicy
	}{{"url: https://a.test/\n", AbortOnLoss}, {"url: https://a.test/\non_agent_loss: abort\n", AbortOnLoss}, {"url: https://a.test/\non_agent_loss: continue\n", ContinueOnLoss}} {
		p, err := ParseFile([]byte(c.in), nil)
		if err != nil || p.OnAgentLoss != c.want {
			t.Errorf("ParseFile(%q) = %v, %v; want %v", c.in, p.OnAgentLoss, err, c.want)
		}
	}
	_, err := ParseFile([]byte("url: https://a.test/\non_agent_loss: retry\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `on_agent_loss = "retry": want abort or continue`) {
		t.Errorf("on_agent_loss: retry: %v", err)
	}
	p := Plan{URL: "https://a.test/", OnAgentLoss: LossPolicy(7)}
	p.SetDefaults()
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "on_agent_loss = loss-policy(7): want abort or continue") {
		t.Errorf("Validate(OnAgentLoss 7) = %v", err)
	}
}

// TestParseFileScalars: a bad number, duration or boolean names its line,
// field and value and says what is wrong in words, every one of them, as
// the flags do; a fraction is never truncated into a whole-number field.
func TestParseFileScalars(t *testing.T) {
	_, err := ParseFile([]byte("url: https://127.0.0.1/\nconnections: abc\nduration: soon\nrate: 1.5\nhttp2: maybe\nkeepalive: no\n"+
		"stages:\n  - {duration: 2s, rate: x}\ntls: {resume: 1}\nmix:\n  - {url: https://127.0.0.1/, weight: 2.5}\n"), nil)
	want := []string{
		`line 2: connections "abc": not a number`,
		`line 3: duration "soon": want a duration such as 10s, 1m or 30`,
		`line 4: rate "1.5": not a whole number`,
		`line 5: http2 "maybe": want true or false`,
		`line 8: stages[0].rate "x": not a number`,
		`line 9: tls.resume "1": want true or false`,
		`line 11: mix[0].weight "2.5": not a whole number`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("ParseFile errors:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	p, err := ParseFile([]byte("url: https://127.0.0.1/\nconnections: 2.0\nrate: 1e3\nhttp2: yes\nduration: 30\n"), nil)
	if err != nil || p.Connections != 2 || p.Rate != 1000 || p.Protocol != H2 || p.Duration != 30*time.Second {
		t.Errorf("ParseFile of whole floats, yes and bare seconds = %+v, %v", p, err)
	}
}

// TestParseFileZeroDurationCountMode: with a request count, duration 0
// keeps its meaning (no time bound: the count alone ends the run).
func TestParseFileZeroDurationCountMode(t *testing.T) {
	p, err := ParseFile([]byte("url: https://x/\nrequests: 100\nduration: 0s\n"), readFiles(nil))
	if err != nil || p.Duration != 0 || p.Requests != 100 {
		t.Fatalf("ParseFile = %+v, %v; want requests 100, duration 0", p, err)
	}
	if p.SetDefaults(); p.Duration != 0 {
		t.Errorf("after SetDefaults duration %v, want 0 (count mode)", p.Duration)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/target/targettest"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// testEnv is a target and an in-process cluster on loopback.
type testEnv struct {
	coord  string
	url    string
	caFile string
	srv    *target.Server
}

func newTestEnv(t *testing.T, agents int) *testEnv {
	t.Helper()
	srv, b := targettest.Start(t)
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(context.Background(), agents, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testEnv{coord: c.Coordinator.GRPCAddr(), url: srv.URL(), caFile: caFile, srv: srv}
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestRunFlagForms checks wrk's flag spellings reach the plan: -c50, -c 50
// and --connections 50; -d2 (bare seconds) and -d 2s; -H repeated, values
// with commas kept whole.
func TestRunFlagForms(t *testing.T) {
	env := newTestEnv(t, 2)
	for _, args := range [][]string{
		{"-c4", "-d1"},
		{"-c", "4", "-d", "1s"},
		{"--connections", "4", "--duration", "1000ms", "-H", "Accept-Encoding: br, gzip", "-H", "X-Test: 1"},
	} {
		jsonFile := filepath.Join(t.TempDir(), "r.json")
		full := append([]string{"--coordinator", env.coord, "run"}, args...)
		full = append(full, "--cacert", env.caFile, "--json", jsonFile, env.url)
		code, stdout, stderr := runCLI(full...)
		if code != 0 {
			t.Fatalf("coordctl %v: exit %d: %s", args, code, stderr)
		}
		var rep struct {
			Connections int64   `json:"connections"`
			DurationS   float64 `json:"duration_s"`
			Requests    int64   `json:"requests"`
			Agents      []struct {
				Connections int64 `json:"connections"`
			} `json:"agents"`
			Timeline []struct {
				Requests  int64  `json:"requests"`
				LatencyV2 []byte `json:"latency_v2"`
			} `json:"timeline"`
		}
		b, err := os.ReadFile(jsonFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Connections != 4 || rep.DurationS != 1 || rep.Requests == 0 || len(rep.Agents) != 2 || rep.Agents[0].Connections != 2 {
			t.Errorf("coordctl %v: report %+v", args, rep)
		}
		// Every timeline point carries its merged latency histogram; they
		// hold every completed request of the window.
		var inTimeline int64
		for i, pt := range rep.Timeline {
			h, err := hist.Decode(pt.LatencyV2)
			if err != nil || h.Count() != pt.Requests {
				t.Errorf("coordctl %v: timeline point %d: %d requests, histogram %v", args, i, pt.Requests, err)
				continue
			}
			inTimeline += h.Count()
		}
		if len(rep.Timeline) == 0 || inTimeline != rep.Requests {
			t.Errorf("coordctl %v: %d timeline points hold %d samples, want %d", args, len(rep.Timeline), inTimeline, rep.Requests)
		}
		if !strings.Contains(stdout, "Requests/sec:") || !strings.Contains(stdout, "2 agents and 4 connections") {
			t.Errorf("coordctl %v: text report:\n%s", args, stdout)
		}
	}
}

func TestCoordinatorFromEnv(t *testing.T) {
	env := newTestEnv(t, 1)
	t.Setenv(CoordinatorEnv, env.coord)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, stdout, stderr := runCLI("agents")
		if code != 0 {
			t.Fatalf("agents: exit %d: %s", code, stderr)
		}
		if strings.Contains(stdout, "agent-1") && strings.Contains(stdout, "idle") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agents output lacks an idle agent-1:\n%s", stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	unknownField := filepath.Join(dir, "unknown.yaml")
	badStage := filepath.Join(dir, "stage.yaml")
	tlsHTTP := filepath.Join(dir, "tls.yaml")
	badLoss := filepath.Join(dir, "loss.yaml")
	twoStages := filepath.Join(dir, "stages.yaml")
	bundle, err := tlsgen.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, bundle.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		badLoss:      "url: https://127.0.0.1/\non_agent_loss: retry\n",
		unknownField: "url: https://127.0.0.1/\nconnection: 5\n",
		badStage:     "url: https://127.0.0.1/\nrate: 100\nstages:\n  - {duration: 1500ms, rate: 200}\n",
		tlsHTTP:      "url: http://127.0.0.1/\ntls: {resume: true}\n",
		twoStages:    "url: https://127.0.0.1/\nstages:\n  - {duration: 2s, connections: 2}\n  - {duration: 2s, connections: 4}\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `coordctl: unknown command "frobnicate" for "coordctl"`},
		{[]string{"frobnicate", "--help"}, `unknown command "frobnicate" for "coordctl"`},
		{[]string{"agent"}, `unknown command "agent" for "coordctl"; did you mean "agents"?`},
		{[]string{"agents", "extra"}, `unknown command "extra" for "coordctl agents"`},
		{[]string{"run", filepath.Join(dir, "missing.yaml")}, "plan file: open " + filepath.Join(dir, "missing.yaml")},
		{[]string{"run", unknownField}, unknownField + `: line 2: unknown field "connection"; did you mean "connections"?`},
		{[]string{"run", badStage}, badStage + ": plan: stages[0].duration = 1.5s: want a multiple of the interval"},
		{[]string{"run", badStage, "-d", "5s"}, "-d/--duration 5s: want at most the stages' total (1.5s)"},
		{[]string{"run", tlsHTTP}, tlsHTTP + ": tls.resume: TLS options do nothing with an http:// URL"},
		{[]string{"run", "--tls-resume", "http://127.0.0.1/"}, "--tls-resume: TLS options do nothing with an http:// URL (http://127.0.0.1/)"},
		{[]string{"run", "-t8", "https://127.0.0.1/"}, "unknown shorthand flag: 't' in -t8; threads are per agent"},
		{[]string{"run", "--max-connections", "5", "https://127.0.0.1/"}, "coordctl: --max-connections 5: want at least connections (10)"},
		{[]string{"run", "-m", "10", "https://127.0.0.1/"}, "coordctl: -m/--max-streams 10: concurrent streams need http2"},
		{[]string{"run", "--cps", "100", "-R", "100", "https://127.0.0.1/"}, "--cps and -R/--rate: choose one"},
		{[]string{"run", "--requests-per-connection", "2", "https://127.0.0.1/"}, "--requests-per-connection: only with --cps"},
		{[]string{"run", "--cps", "100", "--requests-per-connection", "-1", "https://127.0.0.1/"}, "--requests-per-connection -1: want 0 (the handshake only) or more"},
		{[]string{"run", "--cps", "100", "--http2", "https://127.0.0.1/"}, "HTTP/1.1 and HTTP/3 only"},
		{[]string{"run", "--http3", "http://127.0.0.1/"}, "http3 runs over QUIC, which always uses TLS: want an https:// URL"},
		{[]string{"run", "--http3", "--close", "rst", "https://127.0.0.1/"}, "--close rst: a QUIC connection has no TCP reset"},
		{[]string{"run", "--http3", "--cps", "100", "-m", "4", "https://127.0.0.1/"}, "-m/--max-streams 4: a connection-rate connection sends its requests one after another"},
		{[]string{"run", "--http2", "--http3", "https://127.0.0.1/"}, "--http2 and --http3: choose one"},
		{[]string{"run", "--cps", "100", "--no-keepalive", "https://127.0.0.1/"}, "already opens a connection per ticket"},
		{[]string{"run", "--resume-ratio", "1.5", "https://127.0.0.1/"}, "--resume-ratio 1.5: want a fraction from 0 to 1"},
		{[]string{"run", "--resume-ratio", "0.5", "http://127.0.0.1/"}, "--resume-ratio: TLS options do nothing with an http:// URL"},
		{[]string{"run", "--early-data", "--http3", "https://127.0.0.1/"}, "--early-data: 0-RTT needs a session to resume"},
		{[]string{"run", "--early-data", "--tls-resume", "https://127.0.0.1/"}, "--early-data: 0-RTT early data is sent only over HTTP/3"},
		{[]string{"run", "--early-data", "--tls-resume", "--http3", "-X", "POST", "https://127.0.0.1/"}, "--early-data: early data can be replayed (RFC 8470 section 2.1): only GET and HEAD requests, not POST"},
		{[]string{"run", "--close", "reset", "https://127.0.0.1/"}, `--close "reset": want fin or rst`},
		{[]string{"run", "--tls12-session-ids", "https://127.0.0.1/"}, "--tls12-session-ids: not supported: Go's crypto/tls client resumes TLS 1.2 only with session tickets"},
		{[]string{"run", "-R", "-5", "https://127.0.0.1/"}, "-R/--rate -5: want a rate above 0 requests/s, or 0 for closed loop"},
		{[]string{"run", "--pacing-window", "1ms", "https://127.0.0.1/"}, "coordctl: --pacing-window 1ms: a closed-loop plan has no schedule to bunch"},
		{[]string{"run", "--pacing-spin", "https://127.0.0.1/"}, "coordctl: --pacing-spin: a closed-loop plan has no intended send times to spin to"},
		{[]string{"run", "-R", "1000", "--pacing-window", "20ms", "https://127.0.0.1/"}, "coordctl: --pacing-window 20ms: want 0 (each request at its own instant, the default) up to 10ms"},
		{[]string{"run", "--json", "/nonexistent/dir/x.json", "https://127.0.0.1/"}, "--json: open /nonexistent/dir/x.json: no such file or directory"},
		{[]string{"demo", "--json", "/nonexistent/dir/x.json"}, "--json: open /nonexistent/dir/x.json: no such file or directory"},
		{[]string{"run", "--bogus", "https://127.0.0.1/"}, "unknown flag: --bogus"},
		{[]string{"run", "--cacert", "/nonexistent/ca.pem", "https://127.0.0.1/"}, "--cacert: open /nonexistent/ca.pem: no such file or directory"},
		{[]string{"run", "--body", "/nonexistent/body", "https://127.0.0.1/"}, "--body: open /nonexistent/body: no such file or directory"},
		{[]string{"run", "--mix", "/nonexistent/pages.mix", "https://127.0.0.1/"}, "--mix: open /nonexistent/pages.mix: no such file or directory"},
		{[]string{"run", "--cert", "/nonexistent/c.pem", "--key", "/nonexistent/k.pem", "https://127.0.0.1/"}, "--cert: open /nonexistent/c.pem: no such file or directory"},
		{[]string{"ab", "--a", "https://127.0.0.1/", "--b", "https://127.0.0.2/", "--cacert", "/nonexistent/ca.pem"}, "--cacert: open /nonexistent/ca.pem: no such file or directory"},
		{[]string{"run", "--conections", "5", "https://127.0.0.1/"}, "unknown flag: --conections; did you mean --connections? (see coordctl run --help)"},
		{[]string{"--coordinater", "x", "agents"}, "unknown flag: --coordinater; did you mean --coordinator?"},
		{[]string{"--coordinator", "nonsense", "agents"}, `coordctl: --coordinator "nonsense": want HOST:PORT, e.g. 127.0.0.1:7000`},
		{[]string{"run", "--cacert", "main_test.go", "https://127.0.0.1/"}, "--cacert main_test.go: holds no PEM certificate"},
		{[]string{"ab", "--a", "https://127.0.0.1/", "--b", "https://127.0.0.2/", "--repeats", "2"}, "ab: --repeats 2: want 1 (a bootstrap over intervals) or at least 4"},
		{[]string{"ab", "--a", "https://127.0.0.1/", "--b", "https://127.0.0.2/", "--repeats", "1", "-d", "1s"}, "ab: --repeats 1 -d 1s: 1 interval(s) of 1s per run; the bootstrap over intervals needs at least 5 (-d 5s or more), or give --repeats 4 or more"},
		{[]string{"ab", "--a", "https://127.0.0.1/", "--b", "https://127.0.0.2/", "--cacert", "main_test.go"}, "--cacert main_test.go: holds no PEM certificate"},
		{[]string{"run"}, "run takes a URL, or a plan file and optionally a URL, got 0 arguments"},
		{[]string{"run", "-c", "0", "https://127.0.0.1/"}, "connections 0: want at least 1"},
		{[]string{"run", "-d", "soon", "https://127.0.0.1/"}, `-d/--duration "soon": want a duration such as 10s`},
		{[]string{"run", "-c", "abc", "https://127.0.0.1/"}, `coordctl: -c/--connections "abc": not a number (see coordctl run --help)`},
		{[]string{"run", "-n", "1.5", "https://127.0.0.1/"}, `-n/--requests "1.5": not a whole number`},
		{[]string{"run", "-R", "99999999999999999999", "https://127.0.0.1/"}, `-R/--rate "99999999999999999999": out of range for int64`},
		{[]string{"run", "--latency=maybe", "https://127.0.0.1/"}, `--latency "maybe": want true or false`},
		{[]string{"demo", "--agents", "two"}, `--agents "two": not a number`},
		{[]string{"tls", "cert", "create", "--days", "x"}, `--days "x": not a number`},
		{[]string{"run", "ftp://127.0.0.1/"}, `scheme "ftp" not supported`},
		{[]string{"run", "127.0.0.1:8443/x"}, `coordctl: URL "127.0.0.1:8443/x": no scheme: want an absolute URL such as https://127.0.0.1:8443/x (or http://)`},
		{[]string{"run", "--timeout", "0", "https://127.0.0.1/"}, "coordctl: --timeout 0: want a timeout above 0 (the default is 2s)"},
		{[]string{"run", "--interval", "0s", "https://127.0.0.1/"}, "coordctl: --interval 0: want an interval above 0 (the default is 1s)"},
		{[]string{"run", "--http2", "-m", "0", "https://127.0.0.1/"}, "coordctl: -m/--max-streams 0: want at least 1 (the default)"},
		{[]string{"search", "--timeout", "0", "--slo", "p99<3ms", "https://127.0.0.1/"}, "coordctl: --timeout 0: want a timeout above 0"},
		{[]string{"ab", "--timeout", "0", "--a", "https://127.0.0.1/", "--b", "https://127.0.0.2/"}, "coordctl: --timeout 0: want a timeout above 0"},
		{[]string{"run", "-H", "NoColon", "https://127.0.0.1/"}, "want 'Name: value'"},
		{[]string{"run", "-H", "Authorization Bearer s3cret", "https://127.0.0.1/"}, `-H "Authorization"…: want 'Name: value'`},
		{[]string{"run", "--tls-min", "1.3", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256", "https://127.0.0.1/"}, "--ciphers ECDHE-RSA-AES128-GCM-SHA256: cipher suites do nothing when TLS 1.3 is the lowest version"},
		{[]string{"run", "--tls-max", "1.2", "--curves", "X25519MLKEM768,X25519", "https://127.0.0.1/"}, "--curves X25519MLKEM768: X25519MLKEM768 is a TLS 1.3 group, never offered when TLS 1.2 is the highest version"},
		{[]string{"run", "--insecure", "--cacert", caFile, "https://127.0.0.1/"}, "--cacert: a CA does nothing when certificate verification is off"},
		{[]string{"run", "--resolver", "127.0.0.1:53", "https://127.0.0.1/"}, `--resolver "127.0.0.1:53": nothing to resolve: the address dialled, 127.0.0.1, is an IP address`},
		{[]string{"run", "--resolver", "127.0.0.1:53", "--connect-to", "127.0.0.1:443", "https://target.example/"}, "nothing to resolve"},
		{[]string{"run", "--http2", "-m", "4", "--no-keepalive", "https://127.0.0.1/"}, "-m/--max-streams 4: concurrent streams do nothing with no_keepalive"},
		{[]string{"run", "--on-agent-loss", "retry", "https://127.0.0.1/"}, `coordctl: --on-agent-loss: want abort or continue, got "retry"`},
		{[]string{"run", badLoss}, badLoss + `: plan: on_agent_loss = "retry": want abort or continue`},
		{[]string{"run", twoStages, "--threshold", "stage1.p99<5ms", "--threshold", "stage2.p99<5ms"}, `coordctl: --threshold: "stage2.p99<5ms": the plan has 2 stages, stage0 to stage1`},
		{[]string{"run", "--threshold", "stage0.p99<5ms", "https://127.0.0.1/"}, `--threshold: "stage0.p99<5ms": the plan has no stages`},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestJSONFileOfFailedRun: the --json file is created before the run and
// removed when the run fails; an existing file keeps its content.
func TestJSONFileOfFailedRun(t *testing.T) {
	dir := t.TempDir()
	created, existing := filepath.Join(dir, "new.json"), filepath.Join(dir, "old.json")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{created, existing} {
		code, _, stderr := runCLI("--coordinator", "127.0.0.1:1", "run", "-c1", "-d1", "--json", name, "https://127.0.0.1:1/")
		if code != 1 || !strings.Contains(stderr, "unreachable") {
			t.Errorf("run against a closed coordinator port: exit %d, stderr %q", code, stderr)
		}
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("the --json file of a failed run is left behind: %v", err)
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "old" {
		t.Errorf("an existing --json file after a failed run: %q, %v; want its old content", b, err)
	}
}

// TestDescribePlainError: an error that wraps no gRPC status prints its
// own message.
func TestDescribePlainError(t *testing.T) {
	if got := describe(errors.New("coordinator x ended the run without a result")); got != "coordinator x ended the run without a result" {
		t.Errorf("describe = %q", got)
	}
}

// TestAgentPortIsNotACoordinator: --coordinator given an agent's gRPC
// address says so, for a unary call (agents) and a stream (run), instead
// of gRPC's bare "unknown service".
func TestAgentPortIsNotACoordinator(t *testing.T) {
	srv, b := targettest.Start(t)
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(context.Background(), 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	agentAddr := c.Agents[0].GRPCAddr()
	for _, args := range [][]string{
		{"--coordinator", agentAddr, "agents"},
		{"--coordinator", agentAddr, "run", "-c1", "-n1", "--cacert", caFile, srv.URL()},
	} {
		code, _, stderr := runCLI(args...)
		if code == 0 || !strings.Contains(stderr, agentAddr+" is not a Phalanx coordinator") || !strings.Contains(stderr, "agent's --grpc-addr") {
			t.Errorf("coordctl %v: exit %d, stderr %q; want it to say the address is not a coordinator", args[2:], code, stderr)
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("target counted %d requests; want 0", n)
	}
}

// TestRunUnreachableTargetPrintsNoHeader checks that a run whose agents
// cannot connect to the target prints its error alone: stdout stays empty
// (no "Running … test @" header for a test that never ran), and stderr
// names the target and the refusal. A run that measured prints the header
// once, first.
func TestRunUnreachableTargetPrintsNoHeader(t *testing.T) {
	env := newTestEnv(t, 1)
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "-c1", "-d1", "--insecure", "https://127.0.0.1:1/")
	if code == 0 {
		t.Fatalf("run against 127.0.0.1:1 exited 0: %s", stdout)
	}
	if stdout != "" {
		t.Errorf("stdout of a run that never started = %q, want nothing", stdout)
	}
	if !strings.Contains(stderr, "127.0.0.1:1") || !strings.Contains(stderr, "refused") {
		t.Errorf("stderr = %q, want the target and the refusal", stderr)
	}
	code, stdout, stderr = runCLI("--coordinator", env.coord, "run", "-c1", "-d1", "--cacert", env.caFile, env.url)
	if code != 0 {
		t.Fatalf("run against the target: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "Running 1s test @ "+env.url) || strings.Count(stdout, "Running ") != 1 {
		t.Errorf("stdout of a measured run does not start with its one header:\n%s", stdout)
	}
}

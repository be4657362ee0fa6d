package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// pathServer is an HTTPS server on loopback that counts requests per path.
type pathServer struct {
	*httptest.Server
	caFile string
	mu     sync.Mutex
	paths  map[string]int
}

func startPathServer(t *testing.T) *pathServer {
	t.Helper()
	s := &pathServer{paths: map[string]int{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths[r.URL.Path]++
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	s.caFile = filepath.Join(t.TempDir(), "ca.pem")
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	if err := os.WriteFile(s.caFile, pemCA, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *pathServer) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.paths {
		out[k] = v
	}
	return out
}

// TestRunPlanAgainstURL: a URL after a plan file replaces its url, and its
// mix's URLs keep their paths on the new origin: a plan written for
// target.example (which the agents' loopback allowlist would refuse) runs
// against the local server, every request on its mix path; -d shorter than
// the plan's stages cuts them there and says so.
func TestRunPlanAgainstURL(t *testing.T) {
	srv := startPathServer(t)
	c, err := localcluster.Start(context.Background(), 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dir := t.TempDir()
	mix := filepath.Join(dir, "pages.mix")
	planFile := filepath.Join(dir, "plan.yaml")
	files := map[string]string{
		mix:      "GET https://target.example/index1.html\nGET https://target.example/index2.html weight=3\n",
		planFile: "url: https://target.example/\nconnections: 2\nstages:\n  - {duration: 2s, connections: 4}\n  - {duration: 2s, connections: 4}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jsonFile := filepath.Join(dir, "r.json")
	code, _, stderr := runCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", planFile, srv.URL+"/",
		"--mix", mix, "-d", "1s", "--cacert", srv.caFile, "--json", jsonFile)
	if code != 0 {
		t.Fatalf("coordctl run plan.yaml URL: exit %d: %s", code, stderr)
	}
	wantCut := "coordctl: -d 1s cuts the stages of " + planFile + " (4s) at 1s: 1 of 2 stages run, the last ending at 3 connections"
	if !strings.Contains(stderr, wantCut) {
		t.Errorf("stderr lacks %q:\n%s", wantCut, stderr)
	}
	var rep struct {
		Target    string  `json:"target"`
		DurationS float64 `json:"duration_s"`
		Requests  int64   `json:"requests"`
		InFlight  int64   `json:"in_flight"`
		Stages    []struct {
			TargetTo float64 `json:"target_to"`
		} `json:"stages"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Target != srv.URL+"/" || rep.DurationS != 1 || len(rep.Stages) != 1 || rep.Stages[0].TargetTo != 3 {
		t.Errorf("report: target %q, duration %vs, stages %+v; want %s/, 1s, one stage to 3 connections", rep.Target, rep.DurationS, rep.Stages, srv.URL)
	}
	got := srv.counts()
	if got["/index1.html"] == 0 || got["/index2.html"] == 0 || len(got) != 2 {
		t.Errorf("server saw paths %v; want only /index1.html and /index2.html", got)
	}

	// A mix of relative lines (wrk's script paths) goes to the URL given
	// on the command line.
	rel := filepath.Join(dir, "rel.mix")
	noURL := filepath.Join(dir, "nourl.yaml")
	for name, text := range map[string]string{rel: "GET /rel1 weight=3\nGET /rel2?x=1\n", noURL: "connections: 2\n"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = runCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", "-c", "2", "-n", "40", "--mix", rel, "--cacert", srv.caFile, srv.URL+"/")
	if code != 0 {
		t.Fatalf("coordctl run --mix rel.mix URL: exit %d: %s", code, stderr)
	}
	if got := srv.counts(); got["/rel1"] != 30 || got["/rel2"] != 10 {
		t.Errorf("server saw paths %v; want /rel1 30 times and /rel2 10 times (weights 3:1 of -n 40)", got)
	}

	// A CA file that does not sign the server's certificate is named in
	// the failed run's error.
	other, err := tlsgen.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := filepath.Join(dir, "wrong-ca.pem")
	if err := os.WriteFile(wrongCA, other.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", "-c", "1", "-d", "1s", "--cacert", wrongCA, srv.URL+"/")
	if want := "signed neither by the system's CAs nor by the CA file given, " + wrongCA + " (--cacert, tls.ca_file)"; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("coordctl run --cacert wrong-ca.pem: exit %d, stderr %q; want an error containing %q", code, stderr, want)
	}

	// A URL that is no origin, and a second plan file, are usage errors.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", planFile, "ftp://x/"}, `URL "ftp://x/" (after the plan file): scheme "ftp" not supported`},
		{[]string{"run", planFile, planFile}, "is a plan file too"},
		{[]string{"run", "https://127.0.0.1/", "https://127.0.0.2/"}, `"https://127.0.0.1/" is not a plan file`},
		{[]string{"run", planFile, "-d", "5s"}, "-d/--duration 5s: want at most the stages' total (4s)"},
		{[]string{"run", planFile, "-d", "1500ms"}, "-d/--duration 1.5s: want a multiple of the interval (1s)"},
		{[]string{"run", planFile, "http://127.0.0.1/", "--cacert", srv.caFile}, "--cacert: TLS options do nothing with an http:// URL"},
		{[]string{"run", noURL, "--mix", rel}, `mix line 1: url "/rel1" is relative and there is no run URL to resolve it against`},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestRunZeroDuration: -d 0s is refused before any run (it ran the 10 s
// default; ab's, search's and demo's their 5 or 10 s), the flag named,
// alone and over a plan file; with -n it keeps
// count mode's meaning and gets past the flags (to the coordinator, which
// is not there).
func TestRunZeroDuration(t *testing.T) {
	planFile := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(planFile, []byte("url: https://127.0.0.1/\nduration: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "-d", "0s", "https://127.0.0.1/"}, {"run", "-d", "0", planFile}} {
		code, _, stderr := runCLI(args...)
		if want := "-d/--duration 0s: want more than 0"; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q", args, code, stderr, want)
		}
	}
	// ab's, search's and demo's windows have no count mode: 0 is refused.
	for _, args := range [][]string{
		{"ab", "--a", "https://127.0.0.1:1/", "--b", "https://127.0.0.1:2/", "-d", "0"},
		{"search", "--slo", "p99<10ms", "-d", "0s", "https://127.0.0.1/"},
		{"demo", "-d", "0"},
	} {
		code, _, stderr := runCLI(args...)
		if want := `-d/--duration "0`; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "want more than 0") {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q: want more than 0", args, code, stderr, want)
		}
	}
	code, _, stderr := runCLI("--coordinator", "127.0.0.1:1", "run", "-n", "10", "-d", "0s", "https://127.0.0.1/")
	if code == 2 || strings.Contains(stderr, "--duration") {
		t.Errorf("coordctl run -n 10 -d 0s: exit %d, stderr %q; want it past the flags", code, stderr)
	}
}

// TestRunResumeRatioKeepAliveWarning: --resume-ratio on a keep-alive
// closed loop warns on stderr before the run (only reconnects can
// resume); with --no-keepalive it does not.
func TestRunResumeRatioKeepAliveWarning(t *testing.T) {
	want := "warning: --resume-ratio 0.5 on keep-alive connections"
	_, _, stderr := runCLI("--coordinator", "127.0.0.1:1", "run", "--resume-ratio", "0.5", "-d", "1s", "https://127.0.0.1/")
	if !strings.Contains(stderr, want) {
		t.Errorf("keep-alive: stderr %q, want %q", stderr, want)
	}
	_, _, stderr = runCLI("--coordinator", "127.0.0.1:1", "run", "--resume-ratio", "0.5", "--no-keepalive", "-d", "1s", "https://127.0.0.1/")
	if strings.Contains(stderr, "warning: --resume-ratio") {
		t.Errorf("--no-keepalive: stderr %q warns", stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/target"
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
	b, err := tlsgen.New()
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, _, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := target.New(target.Config{Cert: b.Cert})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
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
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--bogus", "https://127.0.0.1/"}, "unknown flag: --bogus"},
		{[]string{"run"}, "exactly one URL"},
		{[]string{"run", "-c", "0", "https://127.0.0.1/"}, "connections 0: want at least 1"},
		{[]string{"run", "-d", "soon", "https://127.0.0.1/"}, "want a duration such as 10s"},
		{[]string{"run", "ftp://127.0.0.1/"}, `scheme "ftp" not supported`},
		{[]string{"run", "-H", "NoColon", "https://127.0.0.1/"}, "want 'Name: value'"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

package main

import (
	"bytes"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
)

// fakeSignals makes coordctl's signal handling take signals from the test
// instead of the operating system, and returns the function that delivers
// one (dropped, as the OS does, when none is being waited for).
func fakeSignals(t *testing.T) func(os.Signal) {
	t.Helper()
	var mu sync.Mutex
	var ch chan<- os.Signal
	oldNotify, oldStop := signalNotify, signalStop
	signalNotify = func(c chan<- os.Signal, _ ...os.Signal) { mu.Lock(); ch = c; mu.Unlock() }
	signalStop = func(chan<- os.Signal) { mu.Lock(); ch = nil; mu.Unlock() }
	t.Cleanup(func() { signalNotify, signalStop = oldNotify, oldStop })
	return func(sig os.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if ch == nil {
			t.Errorf("signal %v sent while coordctl does not handle signals", sig)
			return
		}
		select {
		case ch <- sig:
		default:
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startCLI runs coordctl with args in a goroutine; the channel receives its
// exit status.
func startCLI(args ...string) (stdout, stderr *lockedBuffer, code <-chan int) {
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	ch := make(chan int, 1)
	go func() { ch <- run(args, stdout, stderr) }()
	return stdout, stderr, ch
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunCtrlCStopsEarly: the first SIGINT during coordctl run ends the
// window early; coordctl still prints the report (text and --json) for the
// shortened window and exits 3.
func TestRunCtrlCStopsEarly(t *testing.T) {
	send := fakeSignals(t)
	env := newTestEnv(t, 2)
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := startCLI("--coordinator", env.coord, "run", "-c4", "-d10s", "--cacert", env.caFile, "--json", jsonFile, env.url)

	waitFor(t, 15*time.Second, "the target sees requests", func() bool { return env.srv.Requests() > 0 })
	time.Sleep(time.Second)
	send(syscall.SIGINT)
	var status int
	select {
	case status = <-code:
	case <-time.After(5 * time.Second):
		t.Fatalf("coordctl still running 5 s after SIGINT\nstderr:\n%s", stderr)
	}
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	if status != exitStoppedEarly {
		t.Errorf("exit status %d, want %d", status, exitStoppedEarly)
	}
	if !strings.Contains(stderr.String(), "coordctl: stopping the run early (Ctrl-C again to abandon it)\n") {
		t.Errorf("stderr lacks the stopping message")
	}
	if !strings.Contains(stdout.String(), "Stopped early by the user after ") || !strings.Contains(stdout.String(), " of 10s\n") || !strings.Contains(stdout.String(), "Requests/sec:") {
		t.Errorf("text report lacks the stopped-early line or the rates")
	}
	var rep struct {
		StoppedEarly bool    `json:"stopped_early"`
		DurationS    float64 `json:"duration_s"`
		Requests     int64   `json:"requests"`
		RPS          float64 `json:"rps"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.StoppedEarly || rep.DurationS < 0.7 || rep.DurationS > 3 || rep.Requests == 0 || rep.RPS != float64(rep.Requests)/rep.DurationS {
		t.Errorf("JSON report %+v: want stopped early after about 1 s, with requests", rep)
	}
}

// TestRunSecondCtrlCAbandons: a second SIGINT while the stopped run drains
// abandons it: coordctl exits 130 at once without a report, and the agents
// are released (the coordinator cancels the run).
func TestRunSecondCtrlCAbandons(t *testing.T) {
	send := fakeSignals(t)
	// Every request takes 2 s: after the first SIGINT the run drains for
	// about that long, so the second one lands during the drain.
	var entered atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(context.Background(), 2, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	stdout, stderr, code := startCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", "-c2", "-d10s", "--timeout", "5s", "--cacert", caFile, srv.URL)
	waitFor(t, 15*time.Second, "the target sees requests", func() bool { return entered.Load() > 0 })
	send(syscall.SIGINT)
	waitFor(t, 2*time.Second, "the stopping message", func() bool { return strings.Contains(stderr.String(), "stopping the run early") })
	time.Sleep(200 * time.Millisecond)
	send(syscall.SIGINT)
	abandonedAt := time.Now()
	var status int
	select {
	case status = <-code:
	case <-time.After(3 * time.Second):
		t.Fatalf("coordctl still running 3 s after the second SIGINT\nstderr:\n%s", stderr)
	}
	t.Logf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", status, time.Since(abandonedAt).Round(time.Millisecond), stdout, stderr)
	if status != 130 {
		t.Errorf("exit status %d, want 130 (128 + SIGINT)", status)
	}
	if d := time.Since(abandonedAt); d > time.Second {
		t.Errorf("coordctl took %v to exit after the second SIGINT; want at once", d)
	}
	if !strings.Contains(stderr.String(), "coordctl: run abandoned") {
		t.Errorf("stderr lacks the abandoned message")
	}
	if strings.Contains(stdout.String(), "Requests/sec:") {
		t.Errorf("an abandoned run printed a report")
	}
	// The coordinator cancelled the run: the agents are free again.
	if err := c.WaitAgents(context.Background(), 2, 10*time.Second); err != nil {
		t.Errorf("agents after the abandoned run: %v", err)
	}
}

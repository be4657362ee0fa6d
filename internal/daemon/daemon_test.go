package daemon

import (
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSignalContext: the first SIGINT cancels the context, a second one
// exits with 130, and stop joins the watcher (goleak checks it).
func TestSignalContext(t *testing.T) {
	exited := make(chan int, 1)
	exit = func(code int) { exited <- code }
	defer func() { exit = nil }()

	var logs securitytest.Log
	ctx, stop := SignalContext(slog.New(slog.NewTextHandler(&logs, nil)))
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not canceled by SIGINT")
	}
	if !strings.Contains(logs.String(), `msg="shutting down" signal=interrupt`) {
		t.Errorf("log after SIGINT: %q; want it to say shutting down, signal=interrupt", logs.String())
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit status %d, want 130", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second signal did not exit")
	}
	if !strings.Contains(logs.String(), `msg="second signal: exiting now" signal=terminated status=130`) {
		t.Errorf("log after the second signal: %q", logs.String())
	}
	stop()
	stop() // idempotent
}

// TestSignalContextStop: stop without a signal cancels the context and
// ends the watcher.
func TestSignalContextStop(t *testing.T) {
	ctx, stop := SignalContext(slog.New(slog.DiscardHandler))
	stop()
	if ctx.Err() == nil {
		t.Error("context not canceled by stop")
	}
}

func TestLogger(t *testing.T) {
	if _, err := Logger("debug"); err != nil {
		t.Error(err)
	}
	if _, err := Logger("loud"); err == nil {
		t.Error(`Logger("loud"): want an error`)
	}
}

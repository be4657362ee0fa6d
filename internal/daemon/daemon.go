package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// Logger returns a text logger on stderr at level ("debug", "info", "warn",
// "error").
func Logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// exit is os.Exit; tests replace it.
var exit = os.Exit

// SignalContext returns a context canceled by the first SIGINT or SIGTERM,
// logging it on log at INFO (msg "shutting down", signal=terminated); a
// second one logs at WARN and exits the process with status 130. The
// returned stop stops handling signals (their default action applies
// again), cancels the context and waits for the goroutine that watches
// them; it is idempotent.
func SignalContext(log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case sig := <-ch:
			log.Info("shutting down", "signal", sig.String())
		case <-done:
			return
		}
		cancel()
		select {
		case sig := <-ch:
			log.Warn("second signal: exiting now", "signal", sig.String(), "status", 130)
			exit(130)
		case <-done:
		}
	})
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			wg.Wait()
			cancel()
		})
	}
}

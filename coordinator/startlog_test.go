package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

// TestStartedLogNamesDataDir: the coordinator's start line says where
// its runs are kept (the default is the daemon's directory, used silently
// otherwise), or that they are not; its shutdown logs its leave.
func TestStartedLogNamesDataDir(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{t.TempDir(), ""},
		{"", "data_dir=\"(none: runs are not stored)\""},
	} {
		want := c.want
		if want == "" {
			want = "data_dir=" + c.dir
		}
		logs := &securitytest.Log{}
		co, err := New(Config{Name: "log-coordinator", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", DataDir: c.dir,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = co.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for len(logs.Lines(`msg="coordinator started"`)) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		if lines := logs.Lines(`msg="coordinator started"`, want); len(lines) != 1 {
			t.Errorf("start lines with %s: %q; logged:\n%s", want, lines, logs.String())
		}
		// Alone in its cluster, its leave is confirmed at once: the
		// shutdown says so.
		if lines := logs.Lines(`msg="left the cluster"`); len(lines) != 1 {
			t.Errorf("leave lines after the shutdown: %q; logged:\n%s", lines, logs.String())
		}
	}
}

package coordinator

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the logger's writes and the
// test's reads.
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

// TestStartedLogNamesDataDir: the coordinator's start line says where
// its runs are kept (the default is the daemon's directory, used silently
// otherwise), or that they are not.
func TestStartedLogNamesDataDir(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{t.TempDir(), ""},
		{"", "data_dir=\"(none: runs are not stored)\""},
	} {
		want := c.want
		if want == "" {
			want = "data_dir=" + c.dir
		}
		var logs lockedBuffer
		co, err := New(Config{Name: "log-coordinator", GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", DataDir: c.dir,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = co.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(logs.String(), "coordinator started") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		line, _, _ := strings.Cut(logs.String()[max(strings.Index(logs.String(), "msg=\"coordinator started\""), 0):], "\n")
		if !strings.Contains(line, "coordinator started") || !strings.Contains(line, want) {
			t.Errorf("start line %q: want %s in it", line, want)
		}
	}
}

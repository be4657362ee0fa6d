package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogWriterRepeatsAndHints: memberlist's line per rejected packet is
// logged once per logRepeatEvery with its peer as an attribute and a
// gossip key hint, the lines in between counted; other levels and other
// texts pass.
func TestLogWriterRepeatsAndHints(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	w := newLogWriter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("subsystem", "memberlist"), func() time.Time { return now })
	write := func(s string) {
		if _, err := w.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	const mismatch = "[ERR] memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.1:"
	write(mismatch + "59312")
	for i := range 5 {
		now = now.Add(time.Second)
		write(mismatch + "5931" + string(rune('3'+i)))
	}
	write("[WARN] memberlist: Was able to connect to a2 over TCP but UDP probes failed, network may be misconfigured")
	write("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	write("[DEBUG] memberlist: Stream connection from=127.0.0.1:2")
	now = now.Add(logRepeatEvery)
	write(mismatch + "59400")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5 (mismatch, warn, 2 debug, mismatch again):\n%s", len(lines), buf.String())
	}
	first, last := lines[0], lines[4]
	for _, want := range []string{"level=ERROR", `msg="failed to receive: No installed keys could decrypt the message"`, "peer=127.0.0.1:59312", "hint=", "--gossip-key-file", "subsystem=memberlist"} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %q: %s", want, first)
		}
	}
	if strings.Contains(first, "repeats_suppressed") || !strings.Contains(last, "repeats_suppressed=5") || !strings.Contains(last, "peer=127.0.0.1:59400") {
		t.Errorf("repeat counting: first %s\nlast %s", first, last)
	}
	if strings.Count(buf.String(), "component=") != 0 {
		t.Errorf("a component key from the writer: %s", buf.String())
	}
	if !strings.Contains(lines[1], "level=WARN") || strings.Contains(lines[1], "hint=") {
		t.Errorf("other warning: %s", lines[1])
	}
}

// TestLogWriterClosing: once the member leaves, memberlist's warnings and
// errors (its own closed sockets, peers stopping at the same time) are
// logged at DEBUG, so a clean stop logs no ERROR; before, they keep their
// level.
// TestLogWriterLabelMismatch checks memberlist's line for a stream with
// another cluster label: its peer is an attribute, the message keeps no
// dangling colon, and the hint names --cluster-label.
func TestLogWriterLabelMismatch(t *testing.T) {
	var buf bytes.Buffer
	w := newLogWriter(slog.New(slog.NewTextHandler(&buf, nil)), time.Now)
	if _, err := w.Write([]byte(`[ERR] memberlist: discarding stream with unacceptable label "staging": from=127.0.0.1:50122` + "\n")); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	for _, want := range []string{`msg="discarding stream with unacceptable label \"staging\""`, "peer=127.0.0.1:50122", "--cluster-label"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
}

func TestLogWriterClosing(t *testing.T) {
	var buf bytes.Buffer
	w := newLogWriter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Now)
	const closed = "[ERR] memberlist: Failed to send gossip to 127.0.0.1:27949: write udp 127.0.0.1:27948->127.0.0.1:27949: use of closed network connection"
	const pushPull = "[ERR] memberlist: Push/Pull with a2 failed: dial tcp: connection refused"
	_, _ = w.Write([]byte(closed + "\n"))
	_, _ = w.Write([]byte(pushPull + "\n"))
	w.closing.Store(true)
	_, _ = w.Write([]byte(strings.Replace(closed, "27949", "27950", 2) + "\n"))
	_, _ = w.Write([]byte(strings.Replace(pushPull, "a2", "a3", 1) + "\n"))
	_, _ = w.Write([]byte("[WARN] memberlist: Was able to connect to a3 over TCP but UDP probes failed\n"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=ERROR", "level=ERROR", "level=DEBUG", "level=DEBUG", "level=DEBUG"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, want[i]) {
			t.Errorf("line %d: %s; want %s (before closing: their level; after: DEBUG)", i, l, want[i])
		}
	}
}

// TestKeyHint: each of memberlist's key errors gets the hint that says
// which side lacks what (the join error an agent without a key gets from
// an encrypting cluster used to say the two "share no key"); other
// messages get none.
func TestKeyHint(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"failed to join 127.0.0.1:7946: Remote state is encrypted and encryption is not configured", "this member has no key"},
		{"failed to receive: Encryption is configured but remote state is not encrypted", "the peer has no key"},
		{"failed to join 127.0.0.1:7946: No installed keys could decrypt the message", "share no key"},
	} {
		got := keyHint(c.msg)
		if len(got) != 2 || !strings.Contains(got[1].(string), c.want) || !strings.Contains(got[1].(string), "--gossip-key-file") {
			t.Errorf("keyHint(%q) = %v, want a hint saying %q", c.msg, got, c.want)
		}
	}
	for _, c := range []struct{ msg, want string }{
		{`[ERR] memberlist: discarding stream with unacceptable label "staging": from=127.0.0.1:50122`, "cluster label mismatch"},
		{"failed to join 127.0.0.1:7946: EOF", "another --cluster-label"},
	} {
		got := keyHint(c.msg)
		if len(got) != 2 || !strings.Contains(got[1].(string), c.want) {
			t.Errorf("keyHint(%q) = %v, want a hint saying %q", c.msg, got, c.want)
		}
	}
	if got := keyHint("failed to join 127.0.0.1:7946: read: EOF but more"); got != nil {
		t.Errorf("keyHint(EOF mid-message) = %v, want none", got)
	}
	if got := keyHint("failed to join 127.0.0.1:7946: dial tcp 127.0.0.1:7946: connect: connection refused"); got != nil {
		t.Errorf("keyHint(connection refused) = %v, want none", got)
	}
}

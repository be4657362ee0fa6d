package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestSearchFlagErrors: a bad search command line is a usage error naming
// the flag, before any coordinator is dialled.
func TestSearchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"https://127.0.0.1:1/"}, "no --slo"},
		{[]string{"--slo", "p99<<3ms", "https://127.0.0.1:1/"}, "--slo"},
		{[]string{"--slo", "p99<3ms", "--rate-range", "5000", "https://127.0.0.1:1/"}, "--rate-range \"5000\": want FROM..TO"},
		{[]string{"--slo", "p99<3ms", "--rate-range", "5000..100", "https://127.0.0.1:1/"}, "TO \"100\": want a number at least FROM"},
		{[]string{"--slo", "p99<3ms", "--connections-range", "0..10", "https://127.0.0.1:1/"}, "--connections-range \"0..10\": FROM \"0\""},
		{[]string{"--slo", "p99<3ms", "--rate-range", "1..2", "--connections-range", "1..2", "https://127.0.0.1:1/"}, "give one"},
		{[]string{"--slo", "p99<3ms", "--precision", "0%", "https://127.0.0.1:1/"}, "--precision \"0%\""},
		{[]string{"--slo", "stage1.p99<3ms", "https://127.0.0.1:1/"}, "no stages"},
		{[]string{"--slo", "p99<3ms", "--connections-range", "1..2", "--pacing-window", "1ms", "https://127.0.0.1:1/"}, "search: --pacing-window 1ms: a closed-loop plan has no schedule to bunch"},
		{[]string{"--slo", "p99<3ms", "--pacing-window", "3ms", "https://127.0.0.1:1/"}, "search: --pacing-window 3ms: want a divisor of the interval"},
		{[]string{"--slo", "p99<3ms", "--connections-range", "1..2", "--pacing-spin", "https://127.0.0.1:1/"}, "search: --pacing-spin: a closed-loop plan has no intended send times to spin to"},
	} {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs(append([]string{"--coordinator", "127.0.0.1:1", "search"}, c.args...))
		err := root.Execute()
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("search %q: error %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

// TestPacingWindowFlags: search's and ab's --pacing-window and
// --pacing-spin reach their open-loop plans.
func TestPacingWindowFlags(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	cmd, _, err := root.Find([]string{"search"})
	if err != nil {
		t.Fatal(err)
	}
	sf := searchFlags{slos: []string{"p99<3ms"}, rateRange: "1000..5000", precision: "2%", repeats: 1, maxSteps: 5,
		window: windowDuration(5 * time.Second), timeout: wrkDuration(time.Second), connections: 10, pacingWindow: wrkDuration(time.Millisecond), pacingSpin: true}
	if _, p, err := sf.config(cmd, "https://127.0.0.1:1/"); err != nil || p.PacingWindow != time.Millisecond || !p.PacingSpin || !p.OpenLoop() {
		t.Errorf("search --pacing-window 1ms --pacing-spin: step plan window %v, spin %v, open loop %v, error %v", p.PacingWindow, p.PacingSpin, p.OpenLoop(), err)
	}
	ab := abFlags{connections: 10, duration: windowDuration(5 * time.Second), timeout: wrkDuration(time.Second), rate: 2000, pacingWindow: wrkDuration(time.Millisecond), pacingSpin: true}
	p, err := ab.plan("https://127.0.0.1:1/")
	if err != nil || p.PacingWindow != time.Millisecond || !p.PacingSpin || !p.OpenLoop() {
		t.Errorf("ab -R 2000 --pacing-window 1ms --pacing-spin: plan window %v, spin %v, open loop %v, error %v", p.PacingWindow, p.PacingSpin, p.OpenLoop(), err)
	}
	ab.pacingSpin = false
	ab.pacingWindow = wrkDuration(20 * time.Millisecond)
	if _, err := ab.plan("https://127.0.0.1:1/"); err == nil || !strings.Contains(err.Error(), "--pacing-window 20ms: want 0") {
		t.Errorf("ab -R 2000 --pacing-window 20ms: %v, want the flag named", err)
	}
	ab.rate, ab.pacingWindow = 0, wrkDuration(time.Millisecond)
	if _, err := ab.plan("https://127.0.0.1:1/"); err == nil || !strings.Contains(err.Error(), "--pacing-window 1ms: a closed-loop plan has no schedule to bunch") {
		t.Errorf("ab --pacing-window without -R: %v, want refused", err)
	}
}

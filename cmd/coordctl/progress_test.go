package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// plainLine matches progressLine's output: one line per interval.
var plainLine = regexp.MustCompile(`(?m)^  \[\s*\d+\]\s+\d+ req/s`)

// TestStatusLine checks the live line's fields: elapsed/planned with its
// bar (or the count), the interval's RPS and p99, the run's errors, the
// agents running, and the client-bound warning of each rule.
func TestStatusLine(t *testing.T) {
	late := hist.New()
	for range 100 {
		late.RecordMicros(5000)
	}
	lateness, err := late.Encode()
	if err != nil {
		t.Fatal(err)
	}
	pr := func(idx int32, reqs, errs, p99 int64, pt *pb.TimelinePoint) *pb.Progress {
		pt.Index = idx
		pt.Start, pt.Length = durationpb.New(time.Duration(idx)*time.Second), durationpb.New(time.Second)
		return &pb.Progress{Index: idx, Requests: reqs, Errors: errs, P99Us: p99, Interval: durationpb.New(time.Second), Point: pt}
	}
	// backlogged gives pr's interval n sends late for a free connection
	// (the server's backlog): neither missed nor lateness then flag it;
	// counters gives it counters.
	backlogged := func(p *pb.Progress, n int64) *pb.Progress {
		p.Counters = &pb.Counters{Backlogged: n}
		return p
	}
	counters := func(p *pb.Progress, c *pb.Counters) *pb.Progress {
		p.Counters = c
		return p
	}
	for _, c := range []struct {
		name string
		p    plan.Plan
		in   []*pb.Progress
		want []string
		not  []string
	}{
		{"duration", plan.Plan{Duration: 4 * time.Second},
			[]*pb.Progress{pr(0, 900, 1, 0, &pb.TimelinePoint{Agents: 2}), pr(1, 1000, 2, 4120, &pb.TimelinePoint{Agents: 2, CpuBusy: []float64{0.5, 0.6}})},
			[]string{"2s/4s [==========          ]", "1000 req/s", "p99 4.12ms", "3 errors", "2/2 agents"}, []string{"CLIENT-BOUND"}},
		{"units", plan.Plan{Duration: 4 * time.Second},
			[]*pb.Progress{pr(0, 900, 0, 1996799, &pb.TimelinePoint{Agents: 2})},
			[]string{"p99 2.00s"}, []string{"1.996799s", "µs"}},
		{"microseconds", plan.Plan{Duration: 4 * time.Second},
			[]*pb.Progress{pr(0, 900, 0, 300, &pb.TimelinePoint{Agents: 2})},
			[]string{"p99 300.00us"}, []string{"µs"}},
		{"count", plan.Plan{Requests: 4000},
			[]*pb.Progress{pr(0, 1000, 0, 300, &pb.TimelinePoint{Agents: 3})},
			[]string{"1s 1000/4000 requests [=====               ]", "0 errors", "3/3 agents"}, []string{"CLIENT-BOUND"}},
		{"lost agent", plan.Plan{Duration: 20 * time.Second},
			[]*pb.Progress{pr(11, 10, 0, 300, &pb.TimelinePoint{Agents: 1, Partial: true})},
			[]string{"12s/20s", "1/2 agents"}, nil},
		{"cpu", plan.Plan{Duration: 4 * time.Second},
			[]*pb.Progress{pr(0, 10, 0, 300, &pb.TimelinePoint{Agents: 2, CpuBusy: []float64{0.5, 0.95}})},
			[]string{"CLIENT-BOUND: CPU 95%"}, nil},
		{"missed", plan.Plan{Duration: 4 * time.Second, Load: plan.OpenLoop},
			[]*pb.Progress{pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2, Missed: 5})},
			[]string{"CLIENT-BOUND: 5.0% missed"}, nil},
		{"backlogged", plan.Plan{Duration: 4 * time.Second, Load: plan.OpenLoop},
			[]*pb.Progress{backlogged(pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2, Missed: 5, Lateness: lateness}), 5)},
			nil, []string{"CLIENT-BOUND"}},
		{"missed closed loop", plan.Plan{Duration: 4 * time.Second},
			[]*pb.Progress{pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2, Missed: 5})},
			nil, []string{"CLIENT-BOUND"}},
		{"lateness of queued sends", plan.Plan{Duration: 4 * time.Second, Load: plan.OpenLoop},
			[]*pb.Progress{counters(pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2, Lateness: lateness}), &pb.Counters{Queued: 100})},
			nil, []string{"CLIENT-BOUND"}},
		{"client-late", plan.Plan{Duration: 4 * time.Second, Load: plan.OpenLoop},
			[]*pb.Progress{counters(pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2, Lateness: lateness}), &pb.Counters{ClientLate: 2})},
			[]string{"CLIENT-BOUND: 2.0% sent over 1.00ms late"}, nil},
		{"client-late at the limit", plan.Plan{Duration: 4 * time.Second, Load: plan.OpenLoop},
			[]*pb.Progress{counters(pr(0, 100, 0, 300, &pb.TimelinePoint{Agents: 2}), &pb.Counters{ClientLate: 1})},
			nil, []string{"CLIENT-BOUND"}},
	} {
		v := newProgressView(io.Discard, c.p, false)
		v.accepted(&pb.RunAccepted{Agents: 2})
		var line string
		for _, p := range c.in {
			v.interval(p) // accumulates the errors and requests
			line = v.statusLine(p)
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: status line %q, want %q in it", c.name, line, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(line, w) {
				t.Errorf("%s: status line %q, want no %q in it", c.name, line, w)
			}
		}
	}
}

// readAll collects what is written to r until it fails (its writer side
// closed: io.EOF for a pipe, EIO for a pty's master): so far returns what
// came until now, wait all of it once r has failed.
func readAll(r io.Reader) (sofar func() string, wait func() string) {
	var (
		buf lockedBuffer
		wg  sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			_, _ = buf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return buf.String, func() string { wg.Wait(); return buf.String() }
}

// timelineLen returns the number of timeline points in JSON report file.
func timelineLen(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Timeline []json.RawMessage `json:"timeline"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return len(rep.Timeline)
}

// startPTY opens a pseudo-terminal of cols columns; it returns the
// terminal side (coordctl's stderr), a function that returns what
// coordctl wrote to it so far and one that closes it and returns
// everything coordctl wrote.
func startPTY(t *testing.T, cols uint16) (tty *os.File, sofar, finish func() string) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	sofar, wait := readAll(ptmx)
	return tty, sofar, func() string { tty.Close(); return wait() }
}

// draws splits pty output into the status lines drawn (a carriage return,
// the line, erase-in-line).
var draw = regexp.MustCompile("\r([^\r\n\x1b]+)\x1b\\[K")

// TestRunProgressTerminal: on a terminal (a pseudo-terminal), coordctl run
// keeps one status line updated in place (carriage return, line, erase:
// no newline between updates), cut to the terminal's width, erased before
// the report; no plain progress line is printed.
func TestRunProgressTerminal(t *testing.T) {
	env := newTestEnv(t, 2)
	const cols = 60
	tty, _, finish := startPTY(t, cols)
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	var stdout lockedBuffer
	code := run([]string{"--coordinator", env.coord, "run", "-c4", "-d3", "--cacert", env.caFile, "--json", jsonFile, env.url}, &stdout, tty)
	out := finish()
	if code != 0 {
		t.Fatalf("exit %d: %q", code, out)
	}
	var lines []string
	for _, m := range draw.FindAllStringSubmatch(out, -1) {
		lines = append(lines, m[1])
	}
	if n := timelineLen(t, jsonFile); len(lines) != n || n < 2 {
		t.Errorf("%d status lines drawn for %d intervals (want one each, at least 2): %q", len(lines), n, out)
	}
	for _, l := range lines {
		if len([]rune(l)) > cols-1 {
			t.Errorf("status line %q is wider than the terminal's %d-1 columns", l, cols)
		}
	}
	if len(lines) > 0 && (!strings.Contains(lines[len(lines)-1], "/3s [") || !strings.Contains(lines[len(lines)-1], "req/s")) {
		t.Errorf("last status line %q: want elapsed/3s, the bar and req/s", lines[len(lines)-1])
	}
	first := strings.Index(out, "\r")
	if first < 0 || strings.Contains(out[first:], "\n") {
		t.Errorf("status lines not updated in place (a newline after the first): %q", out)
	}
	if !strings.HasSuffix(out, lineStart+eraseLine) {
		t.Errorf("status line not erased at the end: %q", out)
	}
	if plainLine.MatchString(out) {
		t.Errorf("plain progress lines on a terminal: %q", out)
	}
	if !strings.Contains(stdout.String(), "Requests/sec:") || strings.Contains(stdout.String(), "\r") {
		t.Errorf("report on stdout: %q", stdout.String())
	}
}

// TestRunProgressTerminalCtrlC: a first Ctrl-C's notice erases the status
// line before it prints; the line is erased before coordctl's exit
// message, the report of the shortened window going to stdout.
func TestRunProgressTerminalCtrlC(t *testing.T) {
	send := fakeSignals(t)
	env := newTestEnv(t, 2)
	tty, sofar, finish := startPTY(t, 120)
	var stdout lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--coordinator", env.coord, "run", "-c4", "-d20s", "--cacert", env.caFile, env.url}, &stdout, tty)
	}()
	waitFor(t, 30*time.Second, "a status line on the terminal", func() bool { return draw.MatchString(sofar()) })
	send(syscall.SIGINT)
	var status int
	select {
	case status = <-code:
	case <-time.After(30 * time.Second):
		t.Fatal("coordctl run did not end after Ctrl-C")
	}
	out := finish()
	if status != exitStoppedEarly {
		t.Fatalf("exit %d, want %d: %q", status, exitStoppedEarly, out)
	}
	notice := lineStart + eraseLine + "coordctl: stopping the run early"
	i := strings.Index(out, notice)
	if i < 0 || !draw.MatchString(out[:i]) {
		t.Fatalf("no status line erased before the stop notice: %q", out)
	}
	// The exit message follows the erased line, and no status line after.
	end := lineStart + eraseLine + "coordctl: run "
	if j := strings.LastIndex(out, end); j < i || draw.MatchString(out[j:]) {
		t.Errorf("status line not erased before the exit message, or drawn after it: %q", out)
	}
	if !strings.Contains(stdout.String(), "Stopped early by the user") {
		t.Errorf("report: %q", stdout.String())
	}
}

// TestRunProgressPipe: with stderr a pipe, coordctl run prints one plain
// line per interval and no terminal control; --quiet prints none.
func TestRunProgressPipe(t *testing.T) {
	env := newTestEnv(t, 2)
	for _, quiet := range []bool{false, true} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		_, wait := readAll(r)
		jsonFile := filepath.Join(t.TempDir(), "r.json")
		args := []string{"--coordinator", env.coord, "run", "-c4", "-d2", "--cacert", env.caFile, "--json", jsonFile}
		if quiet {
			args = append(args, "--quiet")
		}
		var stdout lockedBuffer
		code := run(append(args, env.url), &stdout, w)
		w.Close()
		out := wait()
		r.Close()
		if code != 0 {
			t.Fatalf("quiet %v: exit %d: %s", quiet, code, out)
		}
		want := timelineLen(t, jsonFile)
		if quiet {
			want = 0
		}
		if got := len(plainLine.FindAllString(out, -1)); got != want || strings.ContainsAny(out, "\r\x1b") {
			t.Errorf("quiet %v: %d progress lines for %d intervals, want %d, and no terminal control: %q", quiet, got, timelineLen(t, jsonFile), want, out)
		}
	}
}

// TestProgressLineSingular: one agent and one error are singular in the
// plain progress line, two plural.
func TestProgressLineSingular(t *testing.T) {
	one := &pb.Progress{Index: 0, Interval: durationpb.New(time.Second), Requests: 10, Errors: 1, Point: &pb.TimelinePoint{Partial: true, Agents: 1}}
	if got := progressLine(one); !strings.Contains(got, "(partial: 1 agent)") || !strings.HasSuffix(got, "  1 error") {
		t.Errorf("progressLine = %q; want (partial: 1 agent) and 1 error", got)
	}
	two := &pb.Progress{Index: 0, Interval: durationpb.New(time.Second), Requests: 10, Errors: 2, Point: &pb.TimelinePoint{Partial: true, Agents: 2}}
	if got := progressLine(two); !strings.Contains(got, "(partial: 2 agents)") || !strings.HasSuffix(got, "  2 errors") {
		t.Errorf("progressLine = %q; want (partial: 2 agents) and 2 errors", got)
	}
}

package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/selfexec"
)

// rawServerEnv, set in the environment of the test binary, makes it the
// raw keep-alive server (serveRawProcess) instead of running tests.
const rawServerEnv = "PHALANX_ENGINE_RAW_SERVER"

// serveRawProcess listens on 127.0.0.1, prints its address on stdout and
// answers every request with rawResponse until its stdin closes (the
// benchmark that started it ended).
func serveRawProcess() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "raw server:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go acceptRaw(ln)
	var b [1]byte
	_, _ = os.Stdin.Read(b[:]) // returns at EOF: the parent closed the pipe or exited
	ln.Close()
}

// rawResponse is the raw servers' answer: a 600-byte page.
var rawResponse = append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 600\r\n\r\n"), bytes.Repeat([]byte("x"), 600)...)

// acceptRaw serves every connection ln accepts with serveRaw, until ln
// is closed.
func acceptRaw(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serveRaw(c)
	}
}

// serveRaw answers every request head on c with rawResponse, allocating
// nothing per request.
func serveRaw(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		for { // a request head ends with an empty line
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
		}
		if _, err := c.Write(rawResponse); err != nil {
			return
		}
	}
}

// rawServerProcess starts the test binary as a raw keep-alive server in
// its own process and returns its URL and pid; it stops at the end of b.
func rawServerProcess(b *testing.B) (url string, pid int) {
	addr, pid := selfexec.Start(b, rawServerEnv)
	return "http://" + addr + "/", pid
}

// processTicks returns the CPU time (user + system) of process pid from
// /proc/pid/stat, in clock ticks (USER_HZ, 100 per second on Linux).
func processTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (in parentheses, may hold spaces):
	// state is field 3, utime 14, stime 15 (proc(5)).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + s, nil
}

// usage is the process's CPU time and context switches so far
// (getrusage(2) RUSAGE_SELF: every thread).
type usage struct {
	cpu      time.Duration
	vcs, ics int64 // voluntary, involuntary context switches
}

func selfUsage() usage {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return usage{}
	}
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), vcs: ru.Nvcsw, ics: ru.Nivcsw}
}

// BenchmarkOpenLoopCost runs 3-s open-loop windows at 2,000 requests/s
// (16 connections, keep-alive HTTP/1.1, 600-byte page) against the raw
// server in its own process, once per pacing, and reports the client's
// CPU per request (cpu-us/req: this process only), its context switches
// per request (voluntary + involuntary, getrusage(2)), the server
// process's CPU per request (srv-cpu-us/req, at the 10 ms resolution of
// /proc/pid/stat) and the send lateness p50 / p99. Run with
// -benchtime=1x; -count=N interleaves the pacings. This is where the cost
// of a wake-up shows: every send at this rate waits for its own. The
// plan's pacings (slot-timerfd, and slot-timerfd-spin for --pacing-spin)
// also run at 200 and 20,000/s. The
// window=1ms runs, at 2,000 and 20,000/s, add the plan's 1-ms pacing
// window (the sends due in a millisecond released by one wake-up).
func BenchmarkOpenLoopCost(b *testing.B) {
	url, pid := rawServerProcess(b)
	for _, pacing := range []Pacing{PacingGoTimer, PacingTimerfd, PacingSlotTimerfd, PacingSlotTimerfdSpin} {
		b.Run(fmt.Sprintf("R=2000/%s", pacing), func(b *testing.B) {
			for range b.N {
				openLoopCost(b, url, pid, 2000, pacing, 0)
			}
		})
	}
	// The plan's two precise pacings (plan.Plan.PacingSpin off and on) at
	// a low and a high rate.
	for _, rate := range []int{200, 20000} {
		for _, pacing := range []Pacing{PacingSlotTimerfd, PacingSlotTimerfdSpin} {
			b.Run(fmt.Sprintf("R=%d/%s", rate, pacing), func(b *testing.B) {
				for range b.N {
					openLoopCost(b, url, pid, rate, pacing, 0)
				}
			})
		}
	}
	for _, rate := range []int{2000, 20000} {
		for _, pacing := range []Pacing{PacingTimerfd, PacingSlotTimerfd} {
			b.Run(fmt.Sprintf("R=%d/window=1ms/%s", rate, pacing), func(b *testing.B) {
				for range b.N {
					openLoopCost(b, url, pid, rate, pacing, time.Millisecond)
				}
			})
		}
	}
}

func openLoopCost(b *testing.B, url string, pid, rate int, pacing Pacing, window time.Duration) {
	var u [2]usage
	var srv [2]int64
	marks := 0
	all, counts := openLoopRun(b, url, rate, pacing, window, 3*time.Second, func() {
		u[marks] = selfUsage()
		var err error
		if srv[marks], err = processTicks(pid); err != nil {
			b.Fatal(err)
		}
		marks++
	})
	n := float64(counts.Requests)
	b.ReportMetric(float64((u[1].cpu-u[0].cpu).Microseconds())/n, "cpu-us/req")
	b.ReportMetric(float64(u[1].vcs-u[0].vcs+u[1].ics-u[0].ics)/n, "ctxsw/req")
	b.ReportMetric(float64(srv[1]-srv[0])*1e4/n, "srv-cpu-us/req")
	b.ReportMetric(float64(all.Lateness.ValueAtPercentile(50)), "late-p50-us")
	b.ReportMetric(float64(all.Lateness.ValueAtPercentile(99)), "late-p99-us")
	b.ReportMetric(float64(counts.Missed), "missed")
}

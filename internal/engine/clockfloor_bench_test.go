package engine

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClockAlone waits on the engine's default clock (one slot's
// timerfd through the netpoller, PacingPrecise) for instants one interval
// apart, with no connection, no request and no other goroutine, and
// reports how late each wait returned (p50, p99, max; µs): the floor of the
// agent's send lateness on this machine, the same wake-up path without the
// agent's work around it. Intervals: PHALANX_BENCH_CLOCK_INTERVALS
// (comma-separated durations, default 5ms,500us,50us: 200, 2,000 and
// 20,000 sends/s), each for PHALANX_BENCH_CLOCK_SECONDS (default 3). Run
// with -benchtime=1x, pinned where the agent runs (make bench runs it on
// the client CPU beside each lateness row).
func BenchmarkClockAlone(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the precise clock is a timerfd: Linux only")
	}
	intervals := []time.Duration{5 * time.Millisecond, 500 * time.Microsecond, 50 * time.Microsecond}
	if s := os.Getenv("PHALANX_BENCH_CLOCK_INTERVALS"); s != "" {
		intervals = intervals[:0]
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d <= 0 {
				b.Fatalf("PHALANX_BENCH_CLOCK_INTERVALS: %q: want durations such as 500us", f)
			}
			intervals = append(intervals, d)
		}
	}
	secs := 3 * time.Second
	if s := os.Getenv("PHALANX_BENCH_CLOCK_SECONDS"); s != "" {
		d, err := time.ParseDuration(s + "s")
		if err != nil || d <= 0 {
			b.Fatalf("PHALANX_BENCH_CLOCK_SECONDS: %q: want seconds", s)
		}
		secs = d
	}
	for _, iv := range intervals {
		b.Run(fmt.Sprintf("interval=%v", iv), func(b *testing.B) {
			for range b.N {
				late := clockAlone(b, iv, secs)
				b.ReportMetric(late[len(late)/2], "late-p50-us")
				b.ReportMetric(late[len(late)*99/100], "late-p99-us")
				b.ReportMetric(late[len(late)-1], "late-max-us")
			}
		})
	}
}

// clockAlone waits on a fresh PacingPrecise clock for the instants
// interval apart over d and returns each wait's lateness in µs, sorted.
func clockAlone(b *testing.B, interval, d time.Duration) []float64 {
	stopped, ended := make(chan struct{}), make(chan struct{})
	var fds atomic.Int64
	fds.Store(1)
	c := newSendClock(PacingPrecise, stopped, ended, &fds)
	stop := c.start()
	defer stop()
	a := newAlarm()
	defer a.close()
	start := time.Now()
	late := make([]float64, 0, int(d/interval)+1)
	for at := start.Add(interval); at.Sub(start) <= d; at = at.Add(interval) {
		if time.Until(at) <= 0 {
			continue // the last wait ran past this instant: not a wait
		}
		if !c.wait(at, a) {
			b.Fatal("clock stopped")
		}
		late = append(late, float64(time.Since(at).Nanoseconds())/1e3)
	}
	if a.tfd == nil {
		b.Fatal("the clock fell back on Go timers: no timerfd")
	}
	if len(late) == 0 {
		b.Fatal("no wait")
	}
	slices.Sort(late)
	return late
}

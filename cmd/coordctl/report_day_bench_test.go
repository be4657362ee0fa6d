package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// dayRun returns a synthetic finished open-loop run as the run store
// holds it: a result of intervals 1 s intervals from 3 agents, 3000
// responses each (latency lognormal around 800 µs with a day's swing,
// service time, send lateness, TTFB, and in one interval in five a
// connection's connect and TLS handshake), and the same points as the
// store's intervals. The histograms of 240 interval patterns are reused in
// turn (interval i has pattern i mod 240: their bytes are shared until
// stored, the store's copy has one per interval, and a repeat is too far
// back for the page's zlib window to find it); the whole window's are the
// exact sums.
func dayRun(tb testing.TB, intervals int) *pb.StoredRun {
	tb.Helper()
	const patterns, perInterval, agents = 240, 3000, 3
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := []hist.Kind{hist.Latency, hist.Service, hist.Lateness, hist.TTFB, hist.Connect, hist.TLSFull}
	type pattern struct{ v2 [hist.NumKinds][]byte }
	pats := make([]pattern, patterns)
	whole := hist.NewSet()
	uses := make([]int64, patterns)
	for i := range intervals {
		uses[i%patterns]++
	}
	var dec hist.Decoder
	var s hist.Sparse
	for p := range pats {
		set := hist.NewSet()
		scale := 800 * (1 + 0.4*math.Sin(2*math.Pi*float64(p)/patterns))
		for range perInterval {
			us := int64(scale*math.Exp(0.35*rng.NormFloat64())) + 1
			set.Latency.RecordMicros(us)
			set.Service.RecordMicros(max(us-int64(rng.IntN(40)), 1))
			set.Lateness.RecordMicros(1 + int64(rng.ExpFloat64()*8))
			set.TTFB.RecordMicros(max(us/2, 1))
		}
		set.Connect.RecordMicros(40 + int64(rng.IntN(60)))
		set.TLSFull.RecordMicros(900 + int64(rng.IntN(400)))
		for _, k := range kinds {
			b, err := set.Get(k).Encode()
			if err != nil {
				tb.Fatal(err)
			}
			pats[p].v2[k] = b
			if err := dec.Decode(b, &s); err != nil {
				tb.Fatal(err)
			}
			n := uses[p]
			if (k == hist.Connect || k == hist.TLSFull) && p%5 != 0 {
				n = 0 // connections open in the intervals i%5 == 0 only
			}
			for j := range s.Counts {
				s.Counts[j] *= n
			}
			if err := whole.Get(k).AddSparse(&s); err != nil {
				tb.Fatal(err)
			}
		}
	}
	window := time.Duration(intervals) * time.Second
	pl := plan.Plan{URL: "https://127.0.0.1:8443/", Method: "GET", Connections: 64, Duration: window, Interval: time.Second,
		Timeout: plan.DefaultTimeout, Load: plan.OpenLoop, Rate: perInterval, MaxConnections: 256}
	pl.SetDefaults()
	var total measure.Counts
	total.Requests = int64(intervals) * perInterval
	if err := total.AddStatus(200, total.Requests); err != nil {
		tb.Fatal(err)
	}
	total.Issued, total.BytesRead, total.ConnectionsOpened = total.Requests, total.Requests*870, whole.Connect.Count()
	total.HandshakesFull = whole.TLSFull.Count()
	hs, err := wire.HistogramsToProto(whole)
	if err != nil {
		tb.Fatal(err)
	}
	res := &pb.RunResult{RunId: "20261201T000000Z-da7da7", Plan: wire.PlanToProto(pl), StartedAtUnixNano: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
		Window: durationpb.New(window), Histograms: hs, Counters: wire.CountsToProto(&total)}
	for a := range agents {
		ar := &pb.AgentResult{Name: fmt.Sprintf("agent-%d", a+1), Connections: 64 / agents, Requests: total.Requests / agents, Issued: total.Requests / agents,
			CpuTime: durationpb.New(window), Cpus: 4, CpuList: fmt.Sprintf("%d-%d", 4*a, 4*a+3), StartOffset: durationpb.New(time.Duration(a) * 40 * time.Microsecond),
			Rate: perInterval / agents, Ran: durationpb.New(window)}
		ar.IntervalRps = make([]float64, intervals)
		for i := range ar.IntervalRps {
			ar.IntervalRps[i] = perInterval / agents
		}
		res.Agents = append(res.Agents, ar)
	}
	r := &pb.StoredRun{RunId: res.RunId, Plan: res.Plan, AcceptedAtUnixNano: res.StartedAtUnixNano, State: pb.RunState_RUN_STATE_FINISHED, Result: res}
	for i := range intervals {
		p := &pats[i%patterns]
		pt := &pb.TimelinePoint{Index: int32(i), Start: durationpb.New(time.Duration(i) * time.Second), Length: durationpb.New(time.Second),
			Requests: perInterval, TargetRps: perInterval, Agents: agents, CpuBusy: []float64{0.3, 0.35, 0.4},
			Latency: p.v2[hist.Latency], ServiceTime: p.v2[hist.Service], Lateness: p.v2[hist.Lateness], Ttfb: p.v2[hist.TTFB]}
		if i%5 == 0 {
			pt.Connect, pt.TlsFull, pt.Connections = p.v2[hist.Connect], p.v2[hist.TLSFull], 1
		}
		res.Timeline = append(res.Timeline, pt)
		var c measure.Counts
		c.Requests = perInterval
		if err := c.AddStatus(200, perInterval); err != nil {
			tb.Fatal(err)
		}
		r.Intervals = append(r.Intervals, &pb.Progress{RunId: r.RunId, Index: int32(i), Requests: perInterval, Interval: pt.Length, Point: pt, Counters: wire.CountsToProto(&c)})
	}
	return r
}

// BenchmarkReportHTMLDay measures coordctl writing the HTML report of a
// stored 24-hour, 3-agent open-loop run at 1 s intervals (dayRun: 86,400
// intervals, each with latency, service time, lateness, TTFB and in one
// in five connect and TLS histograms): it stores the run in a data
// directory, builds coordctl, and runs `coordctl report RUN --format html
// --data-dir DIR` as a process, reporting its peak RSS (peak-RSS-MB: its
// VmHWM, read every 10 ms while it runs; ru_maxrss would count this
// process's memory, which the child shares until its exec), wall time (wall-s) and CPU time (cpu-s), and the
// page's size (html-MB). The store's file (store-MB) holds the result and
// the same points as the run's intervals. The browser's side of the same
// day is BenchmarkHTMLDayInBrowser (internal/report). PHALANX_DAY_INTERVALS
// changes the day's length. Run it with
// go test -run '^$' -bench ReportHTMLDay -benchtime 1x ./cmd/coordctl/
func BenchmarkReportHTMLDay(b *testing.B) {
	intervals := 86400
	if v := os.Getenv("PHALANX_DAY_INTERVALS"); v != "" {
		if _, err := fmt.Sscan(v, &intervals); err != nil {
			b.Fatalf("PHALANX_DAY_INTERVALS=%q: %v", v, err)
		}
	}
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	bin := filepath.Join(dir, "coordctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	st, err := store.Open(data)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Import(dayRun(b, intervals)); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(data, store.FileName))
	if err != nil {
		b.Fatal(err)
	}
	page := filepath.Join(dir, "day.html")
	b.ResetTimer()
	for range b.N {
		out, err := os.Create(page)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "report", "20261201T000000Z-da7da7", "--format", "html", "--data-dir", data)
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		peak := make(chan int64)
		done := make(chan struct{})
		go func() { peak <- pollHWM(cmd.Process.Pid, done) }()
		err = cmd.Wait()
		wall := time.Since(start)
		close(done)
		hwm := <-peak
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatalf("coordctl report: %v", err)
		}
		html, err := os.Stat(page)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MB")
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), "cpu-s")
		b.ReportMetric(float64(html.Size())/1e6, "html-MB")
		b.ReportMetric(float64(fi.Size())/1e6, "store-MB")
	}
}

// pollHWM returns the largest VmHWM (peak RSS, KB) that /proc/PID/status
// showed, read every 10 ms until done is closed or the process is gone.
func pollHWM(pid int, done <-chan struct{}) int64 {
	var hwm int64
	path := fmt.Sprintf("/proc/%d/status", pid)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return hwm
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
					hwm = max(hwm, kb)
				}
			}
		}
		select {
		case <-done:
			return hwm
		case <-tick.C:
		}
	}
}

package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/selfexec"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// rawTLSServerEnv, set in the environment of the test binary, makes it the
// raw keep-alive server over TLS (serveRawTLSProcess) instead of running
// tests.
const rawTLSServerEnv = "PHALANX_ENGINE_RAW_TLS_SERVER"

// serveRawTLSProcess is serveRawProcess over TLS 1.3 with a certificate of
// its own (tlsgen, for 127.0.0.1): its first line of output is its address
// and, after a space, its CA certificate (PEM, base64).
func serveRawTLSProcess() {
	bundle, err := tlsgen.New("127.0.0.1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "raw tls server:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "raw tls server:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String(), base64.StdEncoding.EncodeToString(bundle.CAPEM))
	go acceptRaw(tls.NewListener(ln, bundle.ServerConfig()))
	var b [1]byte
	_, _ = os.Stdin.Read(b[:]) // returns at EOF: the parent closed the pipe or exited
	ln.Close()
}

// BenchmarkConnectionMemory measures the memory of many open keep-alive
// TLS connections (HTTP/1.1, 600-byte page, closed loop) against the raw
// TLS server in its own process, so that this process's memory is the
// client's alone. For each count (PHALANX_BENCH_MEM_CONNS, comma-separated;
// default 2000,10000; at most the open files allowed, less a few) it
// prepares the connections, runs a 5-s closed-loop window and reports, per
// connection, in KiB: peak-KB/conn, the process's peak RSS (VmHWM, reset
// before Prepare, so the handshakes' garbage counts) above its RSS before;
// run-KB/conn, the highest RSS sampled in the window above it; heap-KB/conn
// and stack-KB/conn, the Go heap's live objects (after a collection) and
// goroutine stacks in the middle of the window above theirs before
// (runtime/metrics); with cpu-us/req, this process's CPU per completed
// request over the window after its first interval, and req/s. Run with -benchtime=1x; compare builds side by side with -count.
func BenchmarkConnectionMemory(b *testing.B) {
	counts := []int{2000, 10000}
	if v := os.Getenv("PHALANX_BENCH_MEM_CONNS"); v != "" {
		counts = counts[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("PHALANX_BENCH_MEM_CONNS=%q: want connection counts, comma-separated", v)
			}
			counts = append(counts, n)
		}
	}
	line, _ := selfexec.Start(b, rawTLSServerEnv)
	addr, caB64, _ := strings.Cut(line, " ")
	ca, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		b.Fatalf("raw tls server's CA: %v", err)
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			for range b.N {
				connectionMemory(b, "https://"+addr+"/", ca, n)
			}
		})
	}
}

func connectionMemory(b *testing.B, url string, ca []byte, n int) {
	p := plan.Plan{URL: url, Connections: n, Duration: 5 * time.Second, Timeout: 10 * time.Second, TLS: plan.TLS{CAPEM: ca}}
	p.SetDefaults()
	e, err := New(context.Background(), Config{Share: plan.Shares("b", p, 1)[0]})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	runtime.GC()
	debug.FreeOSMemory()
	rss0 := procStatusKB(b, "VmRSS")
	heap0, stack0 := goMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("reset the peak RSS: %v", err)
	}
	if _, err := e.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	var (
		mu                sync.Mutex
		rssMax            int64
		heapMid, stackMid uint64
		done              = make(chan struct{})
		sampled           = make(chan struct{})
		cpu0, cpu1        time.Duration
		counts            measure.Counts
		start             = time.Now().Add(50 * time.Millisecond)
		mid               = start.Add(p.Duration / 2)
		midTaken, first   bool
	)
	go func() { // sample RSS through the window, the Go heap in its middle
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				r := procStatusKB(b, "VmRSS")
				mu.Lock()
				rssMax = max(rssMax, r)
				if !midTaken && now.After(mid) {
					midTaken = true
					runtime.GC() // live objects only
					heapMid, stackMid = goMemory()
				}
				mu.Unlock()
			}
		}
	}()
	// CPU and requests from the end of the first interval to the end of
	// the last: the window without the start.
	if _, err := e.Run(context.Background(), start, func(iv Interval) {
		if !first {
			first, cpu0 = true, processCPU()
			return
		}
		counts.Add(&iv.Counts)
		cpu1 = processCPU()
	}); err != nil {
		b.Fatal(err)
	}
	close(done)
	<-sampled
	if counts.Requests == 0 {
		b.Fatal("no request completed")
	}
	hwm := procStatusKB(b, "VmHWM")
	per := func(kb int64) float64 { return float64(kb) / float64(n) }
	b.ReportMetric(per(hwm-rss0), "peak-KB/conn")
	b.ReportMetric(per(rssMax-rss0), "run-KB/conn")
	b.ReportMetric(float64(heapMid-heap0)/1024/float64(n), "heap-KB/conn")
	b.ReportMetric(float64(stackMid-stack0)/1024/float64(n), "stack-KB/conn")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(counts.Requests), "cpu-us/req")
	b.ReportMetric(float64(counts.Requests)/(p.Duration.Seconds()-p.Interval.Seconds()), "req/s")
}

// procStatusKB returns field (VmRSS, VmHWM) of /proc/self/status, in kB.
func procStatusKB(b *testing.B, field string) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("/proc/self/status %s: %v", field, err)
			}
			return kb
		}
	}
	b.Fatalf("/proc/self/status: no %s", field)
	return 0
}

// goMemory returns the bytes of the Go heap's live objects and of the
// goroutine stacks (runtime/metrics).
func goMemory() (heap, stacks uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

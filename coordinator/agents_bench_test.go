package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/selfexec"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// stubAgentsEnv, set in the environment of the test binary, makes it a
// process of simulated agents (ServeStubAgentsFromEnv) instead of running
// tests.
const stubAgentsEnv = "PHALANX_STUB_AGENTS"

// stubAgentsPerProcess bounds the simulated agents one stub process
// serves (its descriptors and goroutines); more agents take more
// processes.
const stubAgentsPerProcess = 5000

// stubNice is the stub processes' nice value (stubLowPriority): below the
// coordinator's priority, so that on a shared machine the coordinator's
// figures are its own and not its stubs' queueing.
const stubNice = 10

// ServeStubAgentsFromEnv serves simulated agents and returns true when
// the test binary was started as a stub process (stubAgentsEnv set), so
// that TestMain exits instead of running tests.
func ServeStubAgentsFromEnv() bool {
	if os.Getenv(stubAgentsEnv) == "" {
		return false
	}
	stubLowPriority()
	// The stubs keep little garbage: collect less often.
	debug.SetGCPercent(400)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub agents:", err)
		os.Exit(1)
	}
	// The agent's keepalive (agent.New): it pings the coordinator after
	// 1 s without a read.
	srv := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Second, Timeout: 2 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)
	pb.RegisterAgentServiceServer(srv, newStubAgents())
	fmt.Println(ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes the pipe or exits
	srv.Stop()
	return true
}

// stubLowPriority sets every thread of the process to nice stubNice
// (Linux's setpriority applies to one thread; threads started later
// inherit their creator's value). Errors are ignored: the stubs then run
// at the coordinator's priority.
func stubLowPriority() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, stubNice)
		}
	}
}

// stubAgents is any number of simulated agents behind one gRPC server:
// each Run stream is one agent, which accepts its share, is ready at
// once, and from the start instant sends one interval per plan interval
// (realistic histograms, precomputed: no load is generated) and its Done.
type stubAgents struct {
	pb.UnimplementedAgentServiceServer
	ivs []*pb.Interval // histograms and counters, shared read-only
}

func newStubAgents() *stubAgents {
	r := rand.New(rand.NewPCG(5, 6))
	s := &stubAgents{}
	for range 64 {
		s.ivs = append(s.ivs, agentInterval(r, 0))
	}
	return s
}

func (s *stubAgents) Clock(context.Context, *pb.ClockRequest) (*pb.ClockResponse, error) {
	return &pb.ClockResponse{NowUnixNano: time.Now().UnixNano()}, nil
}

func (s *stubAgents) Run(stream pb.AgentService_RunServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	share := wire.ShareFromProto(first.GetSetup())
	p := share.Plan
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Accepted{Accepted: &pb.Accepted{DialAddr: "127.0.0.1:1"}}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil { // Connect
		return err
	}
	if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Ready{Ready: &pb.Ready{Connections: int64(share.Connections), UsableCpus: 1}}}); err != nil {
		return err
	}
	start, err := stream.Recv()
	if err != nil {
		return err
	}
	ws := time.Unix(0, start.GetStart().GetStartAtUnixNano()).Add(p.Warmup)
	n := int(p.Duration / p.Interval)
	var issued int64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := range n {
		end := ws.Add(time.Duration(k+1) * p.Interval)
		timer.Reset(time.Until(end))
		select {
		case <-timer.C:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
		src := s.ivs[(share.Index+k)%len(s.ivs)]
		issued += src.GetCounters().GetIssued()
		iv := &pb.Interval{Index: int32(k), StartUnixNano: end.Add(-p.Interval).UnixNano(), EndUnixNano: end.UnixNano(),
			Histograms: src.Histograms, Counters: src.Counters, CpuTime: durationpb.New(300 * time.Millisecond)}
		if err := stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: iv}}); err != nil {
			return err
		}
	}
	done := &pb.Done{Issued: issued, WindowEndUnixNano: ws.Add(p.Duration).UnixNano(), FirstSendUnixNano: ws.UnixNano()}
	// As the agent does, the handler returns after Done: the stream's
	// end tells the coordinator the agent is free.
	return stream.Send(&pb.RunResponse{Msg: &pb.RunResponse_Done{Done: done}})
}

// stubProcesses starts enough stub processes for n agents and returns
// one gRPC address per agent (dealt round-robin over the processes).
func stubProcesses(b *testing.B, n int) []string {
	b.Helper()
	var addrs []string
	for range (n + stubAgentsPerProcess - 1) / stubAgentsPerProcess {
		addr, _ := selfexec.Start(b, stubAgentsEnv)
		addrs = append(addrs, addr)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = addrs[i%len(addrs)]
	}
	return out
}

// BenchmarkCoordinatorAgents runs the coordinator's whole run protocol
// (clock samples, shares, the Ready barrier, the start, one Run stream per
// agent over its own gRPC connection, the merge of every interval, Done, the
// result) against N simulated agents in stub processes (stubAgentsPerProcess
// agents each, at nice stubNice: ServeStubAgentsFromEnv) sending real V2
// histograms at 1-s intervals (PHALANX_BENCH_AGENTS_INTERVAL; latency and
// TTFB, about a thousand distinct values each, 20,000 samples: a busy
// keep-alive agent), for a 30-s window
// (PHALANX_BENCH_AGENTS_WINDOW), and reports for the coordinator's process
// alone: %core, its CPU over the window as a share of one core (gRPC, the
// agents' keepalive pings, decoding, merging, progress); prepare-s, the
// preparation's length; minflt/agent-interval, the minor page faults per
// agent-interval over the same span (a heap still growing to its collector's
// goal: the first seconds of a run cost more); rss-KiB/agent, its resident
// memory growth from before the run to the window's end per agent;
// heap-KiB/agent, the Go heap's likewise; lag-p50-ms and lag-max-ms, from
// each interval's end at the last agent (in the coordinator's clock, by the
// offsets it estimated) to its merge across every agent; offset-spread-ms,
// the range of those offsets (the stubs share the coordinator's clock: it is
// their clock samples' error).
// Run with -benchtime=1x; N=10000 needs a descriptor limit of about 10,300.
// PHALANX_BENCH_WINDOW_PROFILE=file writes a CPU profile of the window alone
// (the last N run's).
func BenchmarkCoordinatorAgents(b *testing.B) {
	for _, n := range []int{100, 1000, 5000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				coordinatorAgents(b, n)
			}
		})
	}
}

func coordinatorAgents(b *testing.B, n int) {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(n)+300 {
		lim.Cur = min(lim.Max, uint64(n)+300)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		if lim.Cur < uint64(n)+300 {
			b.Skipf("%d agents need about %d descriptors, the limit is %d", n, n+300, lim.Cur)
		}
	}
	addrs := stubProcesses(b, n)
	c, ctx := runningCoordinator(b, "bench-coordinator", 5*time.Minute)
	metas := make([]*pb.NodeMeta, n)
	for i := range metas {
		metas[i] = &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: fmt.Sprintf("agent-%05d", i), GrpcAddr: addrs[i], Cpus: 1}
	}
	window := 30 * time.Second
	if v := os.Getenv(agentsWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 3*time.Second || d%time.Second != 0 {
			b.Fatalf("%s=%q: want whole seconds, at least 3s", agentsWindowEnv, v)
		}
		window = d
	}
	interval := time.Second
	if v := os.Getenv(agentsIntervalEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d%time.Second != 0 || window%d != 0 || window/d < 3 {
			b.Fatalf("%s=%q: want whole seconds dividing the window (%v) at least 3 times", agentsIntervalEnv, v, window)
		}
		interval = d
	}
	p := plan.Plan{URL: "http://127.0.0.1:1/", Connections: n, Duration: window, Interval: interval}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		b.Fatal(err)
	}
	rss0, heap0 := rssKiB(), heapKiB()
	rn := c.newRun(ctx, p, metas)
	defer c.unregister(rn.id)
	defer rn.close()
	t0 := time.Now()
	if err := rn.prepare(); err != nil {
		b.Fatal(err)
	}
	prep := time.Since(t0)
	if err := rn.start(); err != nil {
		b.Fatal(err)
	}
	// The stubs start when told, in their clock, which is the
	// coordinator's: each agent's window starts at the run's window start
	// plus the offset the coordinator estimated for it (a busy stub
	// process answers its clock samples late, so some are off by tens of
	// milliseconds). An interval is complete at the latest agent's end.
	var lastOffset, firstOffset time.Duration
	for i, r := range rn.agents {
		if i == 0 || r.offset > lastOffset {
			lastOffset = r.offset
		}
		if i == 0 || r.offset < firstOffset {
			firstOffset = r.offset
		}
	}
	var lags []time.Duration
	var cpuAt1, cpuAtLast time.Duration
	var wallAt1, wallAtLast time.Time
	var rssEnd, heapEnd int64
	var flt1, fltLast int64
	last := int(window/p.Interval) - 1
	hooks := RunHooks{Progress: func(pr *pb.Progress) {
		now := time.Now()
		k := int(pr.GetIndex())
		lags = append(lags, now.Sub(rn.windowStart().Add(lastOffset+time.Duration(k+1)*p.Interval)))
		switch k {
		case 0:
			cpuAt1, wallAt1 = processCPU(), now
			flt1 = minorFaults()
			startWindowProfile(b)
		case last:
			cpuAtLast, wallAtLast = processCPU(), now
			fltLast = minorFaults()
			pprof.StopCPUProfile()
			rssEnd, heapEnd = rssKiB(), heapKiB()
		}
	}}
	if err := rn.loop(hooks); err != nil {
		b.Fatal(err)
	}
	rn.cancel()
	res, err := rn.result()
	if err != nil {
		b.Fatal(err)
	}
	if len(lags) != last+1 || res.GetPartial() {
		lost, first := 0, ""
		for _, a := range res.GetAgents() {
			if a.GetLost() {
				if lost++; first == "" {
					first = a.GetError()
				}
			}
		}
		b.Fatalf("%d intervals merged, want %d; %d agents lost, the first: %s", len(lags), last+1, lost, first)
	}
	slices.Sort(lags)
	b.ReportMetric(100*float64(cpuAtLast-cpuAt1)/float64(wallAtLast.Sub(wallAt1)), "%core")
	b.ReportMetric(prep.Seconds(), "prepare-s")
	b.ReportMetric(float64(fltLast-flt1)/float64(n*last), "minflt/agent-interval")
	b.ReportMetric(float64(rssEnd-rss0)/float64(n), "rss-KiB/agent")
	b.ReportMetric(float64(heapEnd-heap0)/float64(n), "heap-KiB/agent")
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "lag-max-ms")
	b.ReportMetric(float64((lastOffset-firstOffset).Microseconds())/1000, "offset-spread-ms")
}

// agentsWindowEnv sets BenchmarkCoordinatorAgents' measurement window
// (whole seconds, at least 3 s; default 30 s).
const agentsWindowEnv = "PHALANX_BENCH_AGENTS_WINDOW"

// agentsIntervalEnv sets the plan's interval (default 1s): a fleet's
// coordinator cost is per agent-interval.
const agentsIntervalEnv = "PHALANX_BENCH_AGENTS_INTERVAL"

// windowProfileEnv names a file for a CPU profile of the window alone
// (from the first interval's merge to the last: what %core measures, the
// preparation left out), which -cpuprofile cannot give.
const windowProfileEnv = "PHALANX_BENCH_WINDOW_PROFILE"

func startWindowProfile(b *testing.B) {
	path := os.Getenv(windowProfileEnv)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("%s: %v", windowProfileEnv, err)
	}
}

// runningCoordinator starts a coordinator on loopback ports (logs
// discarded) running until the test ends, and returns it and the context
// its runs live on.
func runningCoordinator(tb testing.TB, name string, prepareTimeout time.Duration) (*Coordinator, context.Context) {
	tb.Helper()
	c, err := New(Config{Name: name, GRPCAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		PrepareTimeout: prepareTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c, ctx
}

// processCPU returns the process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKiB returns the process's resident set (VmRSS of /proc/self/status),
// 0 when unreadable.
func rssKiB() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(raw) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// heapKiB returns the Go heap in use (runtime/metrics' objects bytes).
func heapKiB() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() / 1024)
}

// minorFaults returns the process's minor page faults so far
// (getrusage's ru_minflt): each is a fresh page of the heap the kernel
// zeroed, the cost of a heap still growing to its collector's goal.
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}

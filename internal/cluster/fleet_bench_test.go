package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/memberlist"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// gossipBytes sums the bytes memberlist reports sending (its
// memberlist.udp.sent and memberlist.tcp.sent counters, go-metrics) and
// notes when a member last reported a non-empty broadcast queue (its
// memberlist.queue.broadcasts sample, taken every QueueCheckInterval).
type gossipBytes struct {
	metrics.BlackholeSink
	udp, tcp    atomic.Int64
	lastQueued  atomic.Int64 // UnixNano of the last non-zero queue sample
	maxQueued   atomic.Int64 // largest queue sample since reset
	queueSample atomic.Int64 // samples seen
}

func (g *gossipBytes) IncrCounterWithLabels(key []string, val float32, _ []metrics.Label) {
	if len(key) >= 3 {
		key = key[len(key)-3:] // after the service name go-metrics puts first
	}
	if len(key) == 3 && key[0] == "memberlist" && key[2] == "sent" {
		switch key[1] {
		case "udp":
			g.udp.Add(int64(val))
		case "tcp":
			g.tcp.Add(int64(val))
		}
	}
}

func (g *gossipBytes) AddSampleWithLabels(key []string, val float32, _ []metrics.Label) {
	if len(key) >= 3 {
		key = key[len(key)-3:]
	}
	if len(key) != 3 || key[0] != "memberlist" || key[1] != "queue" || key[2] != "broadcasts" {
		return
	}
	g.queueSample.Add(1)
	if val > 0 {
		g.lastQueued.Store(time.Now().UnixNano())
		for {
			m := g.maxQueued.Load()
			if int64(val) <= m || g.maxQueued.CompareAndSwap(m, int64(val)) {
				break
			}
		}
	}
}

// logCounts counts memberlist's log lines by their text up to the first
// member name or address (so "Suspect agent-0042 has failed" and its
// kind for other members count together).
type logCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCounts) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounts) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounts) WithGroup(string) slog.Handler            { return l }
func (l *logCounts) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	for _, cut := range []string{"agent-", "127.0.0.1", ": "} {
		if i := strings.Index(msg, cut); i > 0 {
			msg = msg[:i]
		}
	}
	l.mu.Lock()
	l.n[strings.TrimSpace(msg)]++
	l.mu.Unlock()
	return nil
}

func (l *logCounts) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.n))
	for k := range l.n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l.n[keys[i]] > l.n[keys[j]] })
	var b strings.Builder
	for i, k := range keys {
		if i == 12 {
			break
		}
		fmt.Fprintf(&b, "\n\t%7d  %s", l.n[k], k)
	}
	return b.String()
}

// BenchmarkGossipFleet starts N members in one process with the daemons'
// LAN timings (memberlist.DefaultLANConfig: probe 1 s with a 500 ms
// timeout, gossip every 200 ms to 3 members, push-pull every 30 s scaled
// up with N, suspicion 4 × log10(N) probe intervals), each of them, with
// their timeouts, multiplied by scale (1 is the daemons' timings; a larger
// scale does the same periodic work scale times less often, so that a
// fleet too large for the machine's cores still runs unstarved: CPU and
// bytes per second scale back by × scale, detection time by ÷ scale; the
// N=100 cases check that at 100 members). Each member joins one member
// picked at random among those already joined (32 joins at a time), so
// no one member serves every join. It reports:
//
//   - join-s: until the first member (a coordinator's view) lists every
//     member (at most 3 min; listed says how many it listed then);
//   - drain-s and join-udp-MB: until no member's broadcast queue held a
//     message for 2 s (at most drainBound: every member learning every
//     other queues its alive message for 4 × ceil(log10(N+1))
//     retransmissions, so a fleet's join sends about N² of them), and the
//     fleet's UDP bytes until then;
//   - %core: the whole fleet's gossip CPU over 10 s × scale of steady
//     state, as a share of one core (each member's is %core/N);
//   - udp-B/s/member and tcp-B/s/member: the bytes each member sent per
//     second meanwhile (probes and gossip over UDP, push-pull state syncs
//     over TCP);
//   - detect-s: from one member's crash (no leave) to the first member
//     dropping it (at most 2 min × scale, or 6 min);
//
// and the -unscaled forms of the last four (× scale, ÷ scale for
// detect-s). It logs the load average and memberlist's most frequent log
// lines (suspicions, refutations, failed push-pulls: a starved fleet
// flaps). Run with -benchtime=1x and one case at a time
// (-bench 'GossipFleet/N=1000/'); N=1000 needs about 3,300 descriptors.
func BenchmarkGossipFleet(b *testing.B) {
	sink := &gossipBytes{}
	cfg := metrics.DefaultConfig("bench")
	cfg.EnableRuntimeMetrics = false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ n, scale int }{{100, 1}, {100, 4}, {1000, 1}, {1000, 4}, {1000, 8}} {
		b.Run(fmt.Sprintf("N=%d/scale=%d", tc.n, tc.scale), func(b *testing.B) {
			for range b.N {
				gossipFleet(b, tc.n, tc.scale, sink)
			}
		})
	}
}

func gossipFleet(b *testing.B, n, scale int, sink *gossipBytes) {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(3*n)+300 {
		lim.Cur = min(lim.Max, uint64(3*n)+300)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	s := time.Duration(scale)
	tweakMemberlist = func(mc *memberlist.Config) {
		mc.ProbeInterval *= s
		mc.ProbeTimeout *= s
		mc.GossipInterval *= s
		mc.PushPullInterval *= s
		mc.GossipToTheDeadTime *= s
		mc.TCPTimeout *= s
		mc.QueueCheckInterval = time.Second // sampling only
	}
	defer func() { tweakMemberlist = nil }()
	logf := func(format string, args ...any) {
		b.Logf(format, args...)
		if testing.Verbose() { // b.Logf shows at the end; a run takes minutes
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
		}
	}
	logs := &logCounts{n: map[string]int{}}
	log := slog.New(logs)
	goroutines := runtime.NumGoroutine()
	members := make([]*Cluster, n)
	for i := range members {
		name := fmt.Sprintf("agent-%04d", i)
		meta := &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: name, GrpcAddr: "127.0.0.1:1", Cpus: 2}
		c, err := New(Config{Name: name, BindAddr: "127.0.0.1:0", LAN: true, Meta: func() *pb.NodeMeta { return meta }, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		members[i] = c
	}
	defer func() {
		var wg sync.WaitGroup
		for _, c := range members {
			wg.Go(func() { crash(b, c) })
		}
		wg.Wait()
		// memberlist's timers (ack and suspicion timeouts, indirect probes)
		// run out after Shutdown: wait for them, at most 30 s × scale, so
		// that goleak sees none.
		for end := time.Now().Add(30 * time.Second * s); runtime.NumGoroutine() > goroutines && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
		}
	}()
	first := members[0]
	t0, udpJoin0, drops0 := time.Now(), sink.udp.Load(), udpDrops()
	var joinedMu sync.Mutex
	joined := []string{first.Addr()}
	pick := func() string {
		joinedMu.Lock()
		defer joinedMu.Unlock()
		return joined[rand.IntN(len(joined))]
	}
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	if testing.Verbose() {
		progress.Go(func() {
			tick := time.NewTicker(30 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-tick.C:
				}
				joinedMu.Lock()
				j := len(joined)
				joinedMu.Unlock()
				fmt.Fprintf(os.Stderr, "%s %v: %d joined, %d listed, fleet UDP %.1f MB, UDP receive-buffer drops %d, load average %s\n", time.Now().Format(time.TimeOnly),
					time.Since(t0).Round(time.Second), j, first.liveCount(), float64(sink.udp.Load()-udpJoin0)/1e6, udpDrops()-drops0, loadAverage())
			}
		})
	}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var failedJoins atomic.Int64
	for _, c := range members[1:] {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second*s)
				_, err := c.Join(ctx, []string{pick()})
				cancel()
				if err == nil {
					break
				}
				failedJoins.Add(1)
				if try == 4 {
					b.Error(err)
					return
				}
			}
			joinedMu.Lock()
			joined = append(joined, c.Addr())
			joinedMu.Unlock()
		})
	}
	wg.Wait()
	joinedAll := time.Since(t0)
	// Every member listed, or as many as were within the bound (a loaded
	// machine makes members flap: probes time out).
	for first.liveCount() < n && time.Since(t0) < 3*time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	listedAt, seen := time.Since(t0), first.liveCount()
	logf("joins done after %v (%d failed joins retried); %d of %d members listed after %v",
		joinedAll.Round(time.Millisecond), failedJoins.Load(), seen, n, listedAt.Round(time.Millisecond))
	// The join's broadcasts drain: no queue sample above zero for 2 s.
	bound := drainBound(n, memberlist.DefaultLANConfig(), s)
	for time.Since(time.Unix(0, sink.lastQueued.Load())) < 2*time.Second && time.Since(t0) < bound {
		time.Sleep(100 * time.Millisecond)
	}
	drained, udpJoin := time.Since(t0), sink.udp.Load()-udpJoin0
	drops1 := udpDrops()
	close(stopProgress)
	progress.Wait()
	logf("broadcast queues drained after %v (largest sample %d), fleet UDP %.1f MB; load average %s",
		drained.Round(time.Millisecond), sink.maxQueued.Load(), float64(udpJoin)/1e6, loadAverage())
	sink.maxQueued.Store(0)
	steady := 10 * time.Second * s
	cpu0, udp0, tcp0 := processCPU(), sink.udp.Load(), sink.tcp.Load()
	time.Sleep(steady)
	cpu, udp, tcp := processCPU()-cpu0, sink.udp.Load()-udp0, sink.tcp.Load()-tcp0
	logf("steady state: load average %s, largest queue sample %d, fleet listed by the first member %d, UDP receive-buffer drops %d (%d while joining)",
		loadAverage(), sink.maxQueued.Load(), first.liveCount(), udpDrops()-drops1, drops1-drops0)
	victim := members[n-1] // or the last one the first member lists, in a flapping fleet
	for i := n - 1; i > 0; i-- {
		if first.isLive(members[i].cfg.Name) {
			victim = members[i]
			break
		}
	}
	pct := 100 * cpu.Seconds() / steady.Seconds()
	udpRate := float64(udp) / steady.Seconds() / float64(n)
	tcpRate := float64(tcp) / steady.Seconds() / float64(n)
	logf("steady state: %.1f %%core, %.0f UDP and %.0f TCP B/s per member", pct, udpRate, tcpRate)
	b.ReportMetric(listedAt.Seconds(), "join-s")
	b.ReportMetric(float64(seen), "listed")
	b.ReportMetric(drained.Seconds(), "drain-s")
	b.ReportMetric(float64(udpJoin)/1e6, "join-udp-MB")
	b.ReportMetric(pct, "%core")
	b.ReportMetric(udpRate, "udp-B/s/member")
	b.ReportMetric(tcpRate, "tcp-B/s/member")
	if scale != 1 {
		b.ReportMetric(pct*float64(scale), "%core-unscaled")
		b.ReportMetric(udpRate*float64(scale), "udp-B/s/member-unscaled")
		b.ReportMetric(tcpRate*float64(scale), "tcp-B/s/member-unscaled")
	}
	crashed := time.Now()
	crash(b, victim)
	detectBound := min(2*time.Minute*s, 6*time.Minute) // above the longest suspicion, 6 × 4 × log10(N) probe intervals
	for first.isLive(victim.cfg.Name) && time.Since(crashed) < detectBound {
		time.Sleep(20 * time.Millisecond)
	}
	detect := time.Since(crashed)
	logf("memberlist log lines:%s", logs)
	if first.isLive(victim.cfg.Name) {
		b.Errorf("the crashed member was still listed after %v", detectBound)
		return
	}
	b.ReportMetric(detect.Seconds(), "detect-s")
	if scale != 1 {
		b.ReportMetric(detect.Seconds()/float64(scale), "detect-s-unscaled")
	}
}

// drainBound is how long gossipFleet waits for the join's broadcasts to
// drain: 1.5 × the time each member's queue takes to send N alive
// messages RetransmitMult × ceil(log10(N+1)) times each (memberlist's
// retransmitLimit) at about 15 messages in a 1,400-byte packet to each
// of GossipNodes members per GossipInterval × scale, and at least 5 min.
// For N = 1,000 with the LAN defaults that is 5 min at scale 1 and about
// 14 min at scale 8 (gossip every 1.6 s).
func drainBound(n int, mc *memberlist.Config, scale time.Duration) time.Duration {
	retransmits := mc.RetransmitMult * int(math.Ceil(math.Log10(float64(n+1))))
	perRound := 15 * mc.GossipNodes
	est := time.Duration(n*retransmits/perRound) * mc.GossipInterval * scale
	return max(5*time.Minute, est*3/2)
}

// liveCount returns the number of live members c lists, itself included.
func (c *Cluster) liveCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

// isLive reports whether c lists member name as live.
func (c *Cluster) isLive(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.members[name]
	return ok
}

// loadAverage returns /proc/loadavg's 1-, 5- and 15-minute figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// udpDrops returns the host's count of UDP datagrams dropped for a full
// socket receive buffer (/proc/net/snmp's Udp RcvbufErrors; every
// process's, so a busy host's other traffic counts too), or -1.
func udpDrops() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return -1
	}
	var names []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
		}
	}
	return -1
}

// processCPU returns the process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// gossipBytes sums the bytes memberlist reports sending (its
// memberlist.udp.sent and memberlist.tcp.sent counters, go-metrics).
type gossipBytes struct {
	metrics.BlackholeSink
	udp, tcp atomic.Int64
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

// BenchmarkGossipFleet starts N members in one process with the daemons'
// LAN timings (memberlist.DefaultLANConfig: probe 1 s, gossip 200 ms to 3,
// push-pull 30 s scaled up with N, suspicion 4 × log10(N) probe
// intervals), all joining the first, and reports: join-s, until the first
// member (a coordinator's view) lists every member (at most 2 min; listed
// says how many it listed then); %core, the whole
// fleet's gossip CPU over 10 s of steady state as a share of one core (so
// each member's is %core/N); udp-B/s/member and tcp-B/s/member, the bytes
// each member sent per second meanwhile (probes and gossip over UDP,
// push-pull state syncs over TCP); detect-s, from one member's crash (no
// leave) to the first member dropping it. Run with -benchtime=1x; N=1000
// needs about 2,300 descriptors.
func BenchmarkGossipFleet(b *testing.B) {
	sink := &gossipBytes{}
	cfg := metrics.DefaultConfig("bench")
	cfg.EnableRuntimeMetrics = false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				gossipFleet(b, n, sink)
			}
		})
	}
}

func gossipFleet(b *testing.B, n int, sink *gossipBytes) {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(3*n)+300 {
		lim.Cur = min(lim.Max, uint64(3*n)+300)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
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
			wg.Go(func() {
				c.shutdownOnce.Do(func() {
					close(c.done)
					_ = c.ml.Shutdown()
				})
			})
		}
		wg.Wait()
	}()
	first := members[0]
	t0 := time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, c := range members[1:] {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := c.Join(context.Background(), []string{first.Addr()}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	// Every member listed, or as many as were within 2 min (a loaded
	// machine makes members flap: probes time out after 500 ms).
	for len(first.Members()) < n && time.Since(t0) < 2*time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	joined, seen := time.Since(t0), len(first.Members())
	b.Logf("%d of %d members listed after %v", seen, n, joined.Round(time.Millisecond))
	time.Sleep(5 * time.Second) // the join's broadcasts settle
	const steady = 10 * time.Second
	cpu0, udp0, tcp0 := processCPU(), sink.udp.Load(), sink.tcp.Load()
	time.Sleep(steady)
	cpu, udp, tcp := processCPU()-cpu0, sink.udp.Load()-udp0, sink.tcp.Load()-tcp0
	victim := members[n-1]
	crashed := time.Now()
	victim.shutdownOnce.Do(func() {
		close(victim.done)
		_ = victim.ml.Shutdown()
	})
	for {
		gone := true
		for _, m := range first.Members() {
			if m.GetName() == victim.cfg.Name {
				gone = false
			}
		}
		if gone {
			break
		}
		if time.Since(crashed) > 2*time.Minute {
			b.Fatal("the crashed member was still listed after 2 min")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ReportMetric(joined.Seconds(), "join-s")
	b.ReportMetric(float64(seen), "listed")
	b.ReportMetric(100*cpu.Seconds()/steady.Seconds(), "%core")
	b.ReportMetric(float64(udp)/steady.Seconds()/float64(n), "udp-B/s/member")
	b.ReportMetric(float64(tcp)/steady.Seconds()/float64(n), "tcp-B/s/member")
	b.ReportMetric(time.Since(crashed).Seconds(), "detect-s")
}

// processCPU returns the process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

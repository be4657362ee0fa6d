package coordinator

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// agentInterval builds a realistic interval message: a latency histogram
// with about a thousand distinct values (a keep-alive run at ~20k req/s),
// TTFB likewise, empty phase histograms, a few status and error counts.
func agentInterval(r *rand.Rand, k int32) *pb.Interval {
	h := hist.NewSet()
	var n int64
	for range 20000 {
		v := int64(200 + r.ExpFloat64()*600)
		if r.IntN(1000) == 0 {
			v = 10_000 + r.Int64N(2_000_000)
		}
		h.Latency.RecordMicros(v)
		h.TTFB.RecordMicros(v * 9 / 10)
		n++
	}
	hs := wire.IntervalHistogramsToProto(h) // as agents send them
	return &pb.Interval{
		Index: k, StartUnixNano: int64(k) * int64(time.Second), EndUnixNano: int64(k+1) * int64(time.Second),
		Histograms: hs,
		Counters:   &pb.Counters{Requests: n, Issued: n, BytesRead: n * 800, Status: map[int32]int64{200: n - 3, 503: 3}, Errors: map[string]int64{"timeout": 1}},
		CpuTime:    durationpb.New(300 * time.Millisecond),
	}
}

// BenchmarkMergeAgentInterval feeds the coordinator's merge path one
// interval from each of 1000 simulated agents (decode six V2 histograms,
// check, merge into the window, the interval and the stage), and reports
// the CPU cost per agent-interval, how many agents one core merges at 1 s
// intervals, the share of a core 1000 agents need, and the encoded bytes
// per agent per second on the wire; cpu-us/op is the process's CPU time
// (getrusage) per agent-interval, which on a loaded machine, unlike
// ns/op, leaves out the time the benchmark waited for a CPU.
func BenchmarkMergeAgentInterval(b *testing.B) {
	const agents = 1000
	r := rand.New(rand.NewPCG(1, 2))
	msgs := make([]*pb.Interval, 50) // distinct messages, reused round-robin
	var wireBytes int
	for i := range msgs {
		msgs[i] = agentInterval(r, 0)
		wireBytes += proto.Size(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: msgs[i]}})
	}
	p := plan.Plan{URL: "https://x/", Connections: agents, Duration: time.Hour}
	p.SetDefaults()
	m := merge.New(p, agents) // each round of `agents` adds completes the next interval
	var counts measure.Counts
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		k := i / agents % 3600
		if k == 0 && i%agents == 0 && i > 0 {
			b.StopTimer()
			m = merge.New(p, agents) // the hour's intervals are all merged: start again
			b.StartTimer()
		}
		iv := msgs[i%len(msgs)]
		iv.Index, iv.StartUnixNano, iv.EndUnixNano = int32(k), int64(k)*int64(time.Second), int64(k+1)*int64(time.Second)
		if _, err := addInterval(m, i%agents, 2, time.Unix(0, 0), iv, &counts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(1/perOp, "agents/core@1s")
	b.ReportMetric(100*agents*perOp, "%core@1000agents")
	b.ReportMetric(float64(wireBytes)/float64(len(msgs)), "wireB/agent/s")
}

// TestTimelineHistogramSize measures what the timeline's per-interval
// latency histograms add to a result: one hour at 1 s intervals, each
// interval one of twenty realistic ones above (about a thousand distinct
// latencies each) as merged and encoded by the run. Run with -v to see
// the figures.
func TestTimelineHistogramSize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := plan.Plan{URL: "https://x/", Connections: 1, Duration: time.Hour}
	p.SetDefaults()
	m := merge.New(p, 1)
	const distinct = 20
	for k := range int32(distinct) {
		iv := agentInterval(r, k)
		if _, err := addInterval(m, 0, 2, time.Unix(0, 0), iv, new(measure.Counts)); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := m.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	tl := make([]*merge.Point, 3600)
	for k := range tl {
		pt := *merged[k%distinct]
		pt.Index, pt.Start = k, time.Duration(k)*time.Second
		tl[k] = &pt
	}
	with := &pb.RunResult{Timeline: wire.TimelineToProto(tl)}
	without := proto.Clone(with).(*pb.RunResult)
	for _, pt := range without.Timeline {
		pt.Latency = nil
	}
	added := proto.Size(with) - proto.Size(without)
	t.Logf("1 h at 1 s: timeline %d B without histograms, %d B with: +%d B (%.0f B per interval)",
		proto.Size(without), proto.Size(with), added, float64(added)/3600)
	if per := added / 3600; per > 8<<10 {
		t.Errorf("%d B per interval histogram, want at most 8 KiB (sparse V2 compressed)", per)
	}
}

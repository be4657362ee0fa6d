package coordinator

import (
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

// fuzzWindowStart is the agents' window start in the fuzz: intervals are
// offsets from it.
var fuzzWindowStart = time.Unix(1_800_000_000, 0)

// intervalSeeds are valid intervals in their wire form: an empty one, one
// with requests, errors and TLS counters, and a last, short one.
func intervalSeeds() [][]byte {
	var out [][]byte
	for k, n := range []int{0, 5, 3} {
		s := hist.NewSet()
		c := measure.Counts{Requests: int64(n), BytesRead: int64(600 * n), ConnectionsOpened: 1, HandshakesFull: 1,
			TLS: map[string]int64{"version:TLS 1.3": 1, "alpn:http/1.1": 1}}
		c.Status[200] = int64(n)
		c.Errors[measure.ErrTimeout] = int64(k)
		for i := range n {
			s.Latency.RecordMicros(int64(100 + 1000*i))
			s.TTFB.RecordMicros(int64(50 + 1000*i))
		}
		start := fuzzWindowStart.Add(time.Duration(k) * time.Second)
		length := time.Second
		if k == 2 {
			length = 300 * time.Millisecond
		}
		b, err := proto.Marshal(&pb.Interval{
			Index: int32(k), StartUnixNano: start.UnixNano(), EndUnixNano: start.Add(length).UnixNano(),
			Histograms: wire.IntervalHistogramsToProto(s), Counters: wire.CountsToProto(&c), CpuTime: durationpb.New(length / 10),
		})
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzInterval feeds the coordinator's decoding and merge of an agent's
// Interval (addInterval: counters, histogram bytes, index, times, CPU time)
// arbitrary bytes, from two agents of a 3 s run, after a valid interval of
// each. It must never panic; whatever it refuses leaves the merge as it
// was, and whatever it accepts keeps the merge whole: the window's latency
// samples equal its completed requests, and the timeline builds.
func FuzzInterval(f *testing.F) {
	seeds := intervalSeeds()
	for _, b := range seeds {
		f.Add(b)
	}
	f.Add([]byte{})
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 2, Duration: 3 * time.Second}
	p.SetDefaults()
	var first pb.Interval
	if err := proto.Unmarshal(seeds[1], &first); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var iv pb.Interval
		if proto.Unmarshal(b, &iv) != nil {
			return
		}
		m := merge.New(p, 2)
		var requests int64
		var c measure.Counts
		for a := range 2 {
			if _, err := addInterval(m, a, 2, fuzzWindowStart, &first, &c); err != nil {
				t.Fatalf("valid interval: %v", err)
			} else {
				requests += c.Requests
			}
		}
		for a := range 2 {
			before := m.Counts()
			_, err := addInterval(m, a, 2, fuzzWindowStart, &iv, &c)
			if err != nil {
				if after := m.Counts(); after.Requests != before.Requests || after.ErrorTotal() != before.ErrorTotal() || after.BytesRead != before.BytesRead {
					t.Fatalf("refused interval (%v) changed the window's counts", err)
				}
				continue
			}
			requests += c.Requests
		}
		total := m.Counts()
		if total.Requests != requests || m.Total().Latency.Count() != requests {
			t.Fatalf("window: %d requests, %d latency samples; the accepted intervals hold %d", total.Requests, m.Total().Latency.Count(), requests)
		}
		if _, err := m.Timeline(); err != nil {
			t.Fatalf("timeline: %v", err)
		}
	})
}

// TestIntervalSeedsAccepted: the fuzz seeds are valid intervals, so the
// fuzzer starts from intervals that reach the merge.
func TestIntervalSeedsAccepted(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 2, Duration: 3 * time.Second}
	p.SetDefaults()
	m := merge.New(p, 1)
	for i, b := range intervalSeeds() {
		var iv pb.Interval
		if err := proto.Unmarshal(b, &iv); err != nil {
			t.Fatal(err)
		}
		if _, err := addInterval(m, 0, 2, fuzzWindowStart, &iv, new(measure.Counts)); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}

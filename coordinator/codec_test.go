package coordinator

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/wire"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// aliasSeeds returns encoded RunResponses of every shape unmarshalAliased
// meets or must refuse to take its fast path for.
func aliasSeeds() [][]byte {
	// An agent's interval, small (a fuzz seed is minimized at length).
	h := hist.NewSet()
	for v := range int64(40) {
		h.Latency.RecordMicros(100 + v*v)
		h.TTFB.RecordMicros(90 + v)
	}
	iv := &pb.Interval{Index: 3, StartUnixNano: 1, EndUnixNano: 2, FirstSendUnixNano: 12345,
		Histograms: wire.IntervalHistogramsToProto(h),
		Counters:   &pb.Counters{Requests: 40, Issued: 40, Status: map[int32]int64{200: 39, 503: 1}},
		CpuTime:    durationpb.New(3 * time.Millisecond)}
	enc := func(m *pb.RunResponse) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}
	interval := enc(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: iv}})
	noHists := enc(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{Index: 4, Counters: iv.Counters}}})
	emptyHists := enc(&pb.RunResponse{Msg: &pb.RunResponse_Interval{Interval: &pb.Interval{Index: 5, Histograms: &pb.Histograms{}}}})
	done := enc(&pb.RunResponse{Msg: &pb.RunResponse_Done{Done: &pb.Done{Issued: 9}}})
	// Histograms sent twice in one interval: protobuf merges them.
	ivb, _ := onlyBytesField(interval, runResponseIntervalField)
	extra := protowire.AppendTag(nil, intervalHistogramsField, protowire.BytesType)
	extra = protowire.AppendBytes(extra, mustMarshal(&pb.Histograms{Connect: []byte{1, 2, 3}}))
	twice := protowire.AppendTag(nil, runResponseIntervalField, protowire.BytesType)
	twice = protowire.AppendBytes(twice, append(bytes.Clone(ivb), extra...))
	// A field of Histograms this build does not know, and one repeated.
	hsb := mustMarshal(iv.Histograms)
	unknown := protowire.AppendTag(bytes.Clone(hsb), 99, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("x"))
	repeated := protowire.AppendTag(bytes.Clone(hsb), 1, protowire.BytesType)
	repeated = protowire.AppendBytes(repeated, []byte{7})
	withHists := func(h []byte) []byte {
		in := protowire.AppendTag(nil, 1, protowire.VarintType)
		in = protowire.AppendVarint(in, 6)
		in = protowire.AppendTag(in, intervalHistogramsField, protowire.BytesType)
		in = protowire.AppendBytes(in, h)
		out := protowire.AppendTag(nil, runResponseIntervalField, protowire.BytesType)
		return protowire.AppendBytes(out, in)
	}
	// Two oneof fields: the last wins.
	both := append(bytes.Clone(interval), done...)
	return [][]byte{interval, noHists, emptyHists, done, twice, withHists(unknown), withHists(repeated), both,
		interval[:len(interval)-1], interval[:3], {0xff}, nil}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// checkAliased decodes b both ways and fails unless the results and the
// errors agree.
func checkAliased(t *testing.T, b []byte) (aliased bool) {
	t.Helper()
	var want, got pb.RunResponse
	werr := proto.Unmarshal(b, &want)
	aliased, gerr := unmarshalAliased(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal: %v, unmarshalAliased: %v (input %x)", werr, gerr, b)
	}
	if werr == nil && !proto.Equal(&want, &got) {
		t.Fatalf("unmarshalAliased gave\n%v\nproto.Unmarshal\n%v", &got, &want)
	}
	return aliased
}

// TestUnmarshalAliasedEqualsProto checks that the aliasing decoder gives
// exactly what protobuf-go gives, on every shape including those it hands
// back to proto.Unmarshal, that it takes the fast path on what agents
// send, and that its histograms then share the input's memory (the
// point: no copy) and nothing else of the message does.
func TestUnmarshalAliasedEqualsProto(t *testing.T) {
	seeds := aliasSeeds()
	// The fast path: an interval with histograms, even empty ones or
	// one field sent twice (the last wins, as in protobuf).
	fast := map[int]bool{0: true, 2: true, 6: true}
	for i, b := range seeds {
		if aliased := checkAliased(t, b); aliased != fast[i] {
			t.Errorf("seed %d: aliased %v, want %v", i, aliased, fast[i])
		}
	}
	b := bytes.Clone(seeds[0])
	var m pb.RunResponse
	if aliased, err := unmarshalAliased(b, &m); err != nil || !aliased {
		t.Fatalf("an agent's interval: aliased %v, %v", aliased, err)
	}
	lat := m.GetInterval().GetHistograms().GetLatency()
	counters := proto.Clone(m.GetInterval().GetCounters())
	if len(lat) == 0 {
		t.Fatal("no latency histogram")
	}
	at := bytes.Index(b, lat)
	if at < 0 {
		t.Fatal("latency bytes not found in the input")
	}
	b[at] ^= 0xff
	if lat[0] != b[at] {
		t.Error("the latency histogram was copied, not aliased")
	}
	if cap(lat) != len(lat) {
		t.Errorf("an alias of cap %d > len %d: an append to it would write into the buffer", cap(lat), len(lat))
	}
	for i := range b {
		b[i] = 0
	}
	if !proto.Equal(counters, m.GetInterval().GetCounters()) {
		t.Error("the counters alias the input: only histogram bytes may")
	}
}

// TestAgentCodecRelease checks the codec end to end on gRPC's buffers: an
// aliasedResponse decodes an interval equal to the standard codec's, holds
// its buffer until Release, and any other message type goes through the
// standard codec.
func TestAgentCodecRelease(t *testing.T) {
	c := newAgentCodec()
	if c.Name() != "proto" {
		t.Fatalf("codec name %q: agents expect proto", c.Name())
	}
	b := aliasSeeds()[0]
	pool := mem.NewTieredBufferPool(1 << 16)
	half := len(b) / 2
	// Two buffers, as a message split across frames arrives.
	data := mem.BufferSlice{mem.Copy(b[:half], pool), mem.Copy(b[half:], pool)}
	var ar aliasedResponse
	if err := c.Unmarshal(data, &ar); err != nil {
		t.Fatal(err)
	}
	data.Free()
	var want pb.RunResponse
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&want, ar.Msg) || ar.buf == nil {
		t.Fatalf("aliased decode differs or holds no buffer (%v)", ar.buf != nil)
	}
	ar.Release()
	ar.Release() // idempotent
	if ar.buf != nil {
		t.Fatal("Release kept the buffer")
	}
	var plain pb.RunResponse
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &plain); err != nil || !proto.Equal(&want, &plain) {
		t.Fatalf("standard path: %v", err)
	}
}

// FuzzUnmarshalAliased checks that the aliasing decoder agrees with
// proto.Unmarshal on any input.
func FuzzUnmarshalAliased(f *testing.F) {
	for _, b := range aliasSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAliased(t, b)
	})
}

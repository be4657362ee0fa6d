package coordinator

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// agentCodec is the gRPC codec of the coordinator's dials to agents: the
// standard protobuf codec ("proto", so agents see no difference), except
// that a Run stream's messages received into an *aliasedResponse keep
// their interval's histogram bytes in gRPC's receive buffer instead of
// copying them. protobuf-go copies every bytes field it decodes; those
// copies (about 5 KB per agent-interval, garbage as soon as the merge has
// read them) were a fifth of the coordinator's CPU at 5,000 agents
// (BenchmarkCoordinatorAgents' window profile: the allocation, the GC,
// and the kernel zeroing the heap's fresh pages).
//
// It relies on grpc.ForceCodecV2, which grpc-go marks experimental.
type agentCodec struct{ std encoding.CodecV2 }

func newAgentCodec() agentCodec { return agentCodec{std: encoding.GetCodecV2("proto")} }

func (c agentCodec) Name() string { return c.std.Name() }

func (c agentCodec) Marshal(v any) (mem.BufferSlice, error) { return c.std.Marshal(v) }

func (c agentCodec) Unmarshal(data mem.BufferSlice, v any) error {
	ar, ok := v.(*aliasedResponse)
	if !ok {
		return c.std.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	ar.Msg = new(pb.RunResponse)
	aliased, err := unmarshalAliased(buf.ReadOnlyData(), ar.Msg)
	if err != nil || !aliased {
		buf.Free() // ar.Msg holds copies, if anything
		return err
	}
	ar.buf = buf
	return nil
}

// aliasedResponse receives one RunResponse through agentCodec. When the
// message is an Interval, its Histograms' bytes may alias the receive
// buffer: they are valid until Release, which returns the buffer to
// gRPC's pool, and whatever keeps a histogram beyond it must copy it.
type aliasedResponse struct {
	Msg *pb.RunResponse
	buf mem.Buffer // nil when nothing aliases it
}

// Release ends the validity of Msg's aliased bytes. It is idempotent; an
// aliasedResponse never released leaves its buffer to the garbage
// collector instead of the pool.
func (ar *aliasedResponse) Release() {
	if ar.buf != nil {
		ar.buf.Free()
		ar.buf = nil
	}
}

// Field numbers of the wire format read by unmarshalAliased (agent.proto:
// RunResponse.interval, Interval.histograms).
const (
	runResponseIntervalField protowire.Number = 2
	intervalHistogramsField  protowire.Number = 4
)

var histogramsFields = (&pb.Histograms{}).ProtoReflect().Descriptor().Fields()

// unmarshalAliased decodes b into m as proto.Unmarshal does, except that
// when b is one Interval whose Histograms hold only bytes fields, those
// fields alias b (aliased is then true) instead of being copied. Any other
// shape (another message, a repeated or unknown field where the fast path
// expects one) is decoded by proto.Unmarshal, copies and all: the result
// is always what proto.Unmarshal gives (TestUnmarshalAliasedEqualsProto).
func unmarshalAliased(b []byte, m *pb.RunResponse) (aliased bool, err error) {
	ivb, ok := onlyBytesField(b, runResponseIntervalField)
	if !ok {
		return false, proto.Unmarshal(b, m)
	}
	// The interval without its histograms, which are read apart.
	var rest []byte
	var hb []byte
	seen := false
	for in := ivb; len(in) > 0; {
		num, typ, n := protowire.ConsumeField(in)
		if n < 0 {
			return false, proto.Unmarshal(b, m) // its error
		}
		if num == intervalHistogramsField {
			if seen || typ != protowire.BytesType {
				return false, proto.Unmarshal(b, m) // merged twice, or foreign: the general path
			}
			seen = true
			_, _, tn := protowire.ConsumeTag(in)
			hb, _ = protowire.ConsumeBytes(in[tn:n])
		} else {
			rest = append(rest, in[:n]...)
		}
		in = in[n:]
	}
	iv := new(pb.Interval)
	if err := proto.Unmarshal(rest, iv); err != nil {
		return false, err
	}
	if seen {
		hs := new(pb.Histograms)
		r := hs.ProtoReflect()
		for in := hb; len(in) > 0; {
			num, typ, n := protowire.ConsumeTag(in)
			fd := histogramsFields.ByNumber(num)
			if n < 0 || typ != protowire.BytesType || fd == nil || fd.Kind() != protoreflect.BytesKind || fd.IsList() {
				return false, proto.Unmarshal(b, m)
			}
			v, vn := protowire.ConsumeBytes(in[n:])
			if vn < 0 {
				return false, proto.Unmarshal(b, m)
			}
			// Set keeps the slice itself (protobuf-go's bytes
			// fields are plain []byte): the alias.
			r.Set(fd, protoreflect.ValueOfBytes(v[:len(v):len(v)]))
			in = in[n+vn:]
		}
		iv.Histograms = hs
	}
	m.Msg = &pb.RunResponse_Interval{Interval: iv}
	return seen, nil
}

// onlyBytesField returns the payload of b when b is exactly one field,
// number num and length-delimited.
func onlyBytesField(b []byte, num protowire.Number) ([]byte, bool) {
	n, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 || n != num || typ != protowire.BytesType {
		return nil, false
	}
	v, vn := protowire.ConsumeBytes(b[tn:])
	if vn < 0 || tn+vn != len(b) {
		return nil, false
	}
	return v, true
}

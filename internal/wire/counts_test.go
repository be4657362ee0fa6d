package wire

import (
	"strings"
	"testing"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestCountsFromProtoRejects: counters from another machine that would
// corrupt a merge (negative, overflowing, inconsistent, unknown) are errors
// naming the counter, never counts.
func TestCountsFromProtoRejects(t *testing.T) {
	ok := func() *pb.Counters {
		return &pb.Counters{Requests: 3, Status: map[int32]int64{200: 2, 503: 1}, Errors: map[string]int64{"reset": 1},
			Tls: map[string]int64{"version:TLS 1.3": 1, "alpn:h2": 1}}
	}
	if _, err := CountsFromProto(ok()); err != nil {
		t.Fatalf("valid counters: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(m *pb.Counters)
		want string
	}{
		{"negative requests", func(m *pb.Counters) { m.Requests = -3; m.Status = nil }, "counters: requests = -3: want 0 to 1099511627776"},
		{"huge bytes", func(m *pb.Counters) { m.BytesRead = 1 << 62 }, "counters: bytes_read = 4611686018427387904"},
		{"negative header bytes", func(m *pb.Counters) { m.HeaderBytes = -1 }, "counters: header_bytes = -1"},
		{"unknown encoding", func(m *pb.Counters) { m.ContentEncoding = map[string]int64{"rot13": 1} }, `unknown content encoding "rot13"`},
		{"negative encoding count", func(m *pb.Counters) { m.ContentEncoding = map[string]int64{"br": -1} }, "counters: content_encoding[br] = -1"},
		{"negative missed", func(m *pb.Counters) { m.Missed = -1 }, "counters: missed = -1"},
		{"negative status count", func(m *pb.Counters) { m.Status[200] = -2 }, "counters: status[200] = -2"},
		{"status below 100", func(m *pb.Counters) { m.Status[42] = 1 }, "status code 42 outside [100, 600)"},
		{"status above", func(m *pb.Counters) { m.Status[600] = 1 }, "status code 600 outside [0, 600)"},
		{"status sum", func(m *pb.Counters) { m.Requests = 4 }, "counters: 4 requests, but their status codes sum to 3"},
		{"unknown error kind", func(m *pb.Counters) { m.Errors["boom"] = 1 }, `"boom"`},
		{"negative error count", func(m *pb.Counters) { m.Errors["reset"] = -1 }, "counters: errors[reset] = -1"},
		{"TLS key kind", func(m *pb.Counters) { m.Tls["evil:x"] = 1 }, `TLS key "evil:x": want a version, cipher, group, alpn or transport key`},
		{"TLS value escape", func(m *pb.Counters) { m.Tls["cipher:\x1b[2J"] = 1 }, "printable ASCII"},
		{"TLS value empty", func(m *pb.Counters) { m.Tls["group:"] = 1 }, "printable ASCII"},
		{"TLS count", func(m *pb.Counters) { m.Tls["alpn:h2"] = -1 }, `tls["alpn:h2"] = -1`},
		{"TLS keys", func(m *pb.Counters) {
			for i := range MaxTLSKeys {
				m.Tls["cipher:"+strings.Repeat("x", i+1)] = 1
			}
		}, "TLS keys: want at most 256"},
	} {
		m := ok()
		tc.edit(m)
		if _, err := CountsFromProto(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CountsFromProto = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

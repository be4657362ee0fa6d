package wire

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func TestPlanRoundTrip(t *testing.T) {
	p := plan.Plan{
		URL: "https://app.test:8443/x?y=1", Method: "POST", Body: []byte("{}"),
		Headers:     []plan.Header{{Name: "Accept-Encoding", Value: "br"}, {Name: "X-A", Value: "1"}},
		Connections: 750, Duration: time.Minute, Timeout: 3 * time.Second, Interval: time.Second, Agents: 3,
		TLS: plan.TLS{Insecure: true, CAPEM: []byte("pem"), CAFile: "certs/ca.pem", ServerName: "svc.test"},
	}
	if got := PlanFromProto(PlanToProto(p)); !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip = %+v, want %+v", got, p)
	}
	s := plan.Share{RunID: "r", Plan: p, Index: 1, Count: 3, Connections: 250}
	if got := ShareFromProto(ShareToProto(s)); !reflect.DeepEqual(got, s) {
		t.Fatalf("share round trip = %+v, want %+v", got, s)
	}
}

// TestPlanLoadRoundTrip: the load model (oneof) and the protocol (enum)
// survive the proto, with each stage's target in the field its model says.
func TestPlanLoadRoundTrip(t *testing.T) {
	for _, p := range []plan.Plan{
		{URL: "https://x/", Connections: 10, MaxConnections: 50, Protocol: plan.H2, MaxStreams: 8, Load: plan.OpenLoop, Rate: 1000,
			Stages: []plan.Stage{{Duration: time.Second, Rate: 2000}, {Duration: 2 * time.Second, Rate: 0}}},
		{URL: "https://x/", Load: plan.OpenLoop, Stages: []plan.Stage{{Duration: time.Second, Rate: 5}}},
		{URL: "https://x/", Load: plan.OpenLoop, Rate: 20000, PacingWindow: time.Millisecond},
		{URL: "https://x/", Load: plan.OpenLoop, Rate: 200, PacingSpin: true},
		{URL: "http://x/", Connections: 4, Stages: []plan.Stage{{Duration: time.Second, Connections: 9}}},
		{URL: "http://x/", Connections: 4},
		{URL: "https://x/", Connections: 4, Protocol: plan.H3, Load: plan.OpenLoop, Rate: 100, ConnectionRate: true, RequestsPerConnection: 2},
	} {
		m := PlanToProto(p)
		if got := PlanFromProto(m); !reflect.DeepEqual(got, p) {
			t.Errorf("round trip = %+v, want %+v", got, p)
		}
		if (m.GetOpenLoop() != nil) != (p.Load == plan.OpenLoop) {
			t.Errorf("PlanToProto(%+v): open_loop set = %v", p, m.GetOpenLoop() != nil)
		}
	}
	if got := PlanFromProto(&pb.Plan{Protocol: pb.Protocol(7)}); got.Validate() == nil {
		t.Errorf("an unknown protocol from the wire validates: %+v", got)
	}
}

func TestCountsRoundTrip(t *testing.T) {
	var c measure.Counts
	c.Issued, c.Requests, c.BytesRead, c.Missed, c.Retries = 9, 5, 1234, 2, 1
	c.Status[200], c.Status[503] = 4, 1
	c.Errors[measure.ErrReset], c.Errors[measure.ErrTimeout] = 2, 1
	c.ConnectionsOpened, c.Reconnects, c.HandshakesFull, c.HandshakesResumed = 3, 1, 2, 1
	c.TLS = map[string]int64{"version:TLS 1.3": 3}
	c.HeaderBytes, c.BodyBytes, c.HeaderFieldBytes = 300, 900, 500
	c.Encodings[measure.EncBrotli], c.Encodings[measure.EncIdentity] = 4, 1
	got, err := CountsFromProto(CountsToProto(&c))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip\n got %+v\nwant %+v", got, c)
	}
	if _, err := CountsFromProto(&pb.Counters{Errors: map[string]int64{"gremlins": 1}}); err == nil {
		t.Error("unknown error kind accepted")
	}
	if _, err := CountsFromProto(&pb.Counters{Status: map[int32]int64{600: 1}}); err == nil {
		t.Error("status 600 accepted")
	}
}

func TestHistogramsRoundTripByKind(t *testing.T) {
	s := hist.NewSet()
	for k := range hist.NumKinds {
		for i := range int(k) + 1 {
			s.Get(k).RecordMicros(int64(100*i + 1))
		}
	}
	m, err := HistogramsToProto(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := HistogramsFromProto(m)
	if err != nil {
		t.Fatal(err)
	}
	for k := range hist.NumKinds {
		if back.Get(k).Count() != int64(k)+1 {
			t.Errorf("%s: %d samples, want %d", k, back.Get(k).Count(), int64(k)+1)
		}
	}
	iv := IntervalHistogramsToProto(s) // uncompressed: each kind in its field
	var d hist.Decoder
	var sp hist.Sparse
	for k := range hist.NumKinds {
		if err := d.Decode(HistogramBytes(iv, k), &sp); err != nil || sp.Total != int64(k)+1 {
			t.Errorf("interval %s: %d samples (%v), want %d", k, sp.Total, err, int64(k)+1)
		}
	}
}

// TestPointHistogramsRoundTrip: a merged point's histograms (latency,
// service time, lateness and the phases it measured) reach the report's
// interval by kind, still encoded and byte for byte; a phase it did not
// measure stays absent, and a corrupt one is refused with its kind named.
func TestPointHistogramsRoundTrip(t *testing.T) {
	enc := func(us int64) []byte {
		h := hist.New()
		h.RecordMicros(us)
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pt := &merge.Point{Index: 3, Length: time.Second, Latency: enc(900), Service: enc(800), Lateness: enc(5)}
	pt.Phases[hist.Connect], pt.Phases[hist.TLSFull], pt.Phases[hist.TTFB] = enc(40), enc(1200), enc(450)
	iv, err := IntervalFromProto(PointToProto(pt))
	if err != nil {
		t.Fatal(err)
	}
	want := map[hist.Kind][]byte{hist.Latency: pt.Latency, hist.Service: pt.Service, hist.Lateness: pt.Lateness,
		hist.Connect: pt.Phases[hist.Connect], hist.TLSFull: pt.Phases[hist.TLSFull], hist.TTFB: pt.Phases[hist.TTFB]}
	for k := range hist.NumKinds {
		if !bytes.Equal(iv.V2[k], want[k]) {
			t.Errorf("kind %s: %d bytes, want %d", k, len(iv.V2[k]), len(want[k]))
		}
	}
	bad := PointToProto(pt)
	bad.Ttfb = []byte("not a histogram")
	if _, err := IntervalFromProto(bad); err == nil || !strings.Contains(err.Error(), "ttfb") {
		t.Errorf("a corrupt TTFB histogram: err %v, want one naming ttfb", err)
	}
}

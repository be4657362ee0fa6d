package wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func TestPlanRoundTrip(t *testing.T) {
	p := plan.Plan{
		URL: "https://app.test:8443/x?y=1", Method: "POST", Body: []byte("{}"),
		Headers:     []plan.Header{{Name: "Accept-Encoding", Value: "br"}, {Name: "X-A", Value: "1"}},
		Connections: 750, Duration: time.Minute, Timeout: 3 * time.Second, Interval: time.Second, Agents: 3,
		TLS: plan.TLS{Insecure: true, CAPEM: []byte("pem"), ServerName: "svc.test"},
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
		{URL: "http://x/", Connections: 4, Stages: []plan.Stage{{Duration: time.Second, Connections: 9}}},
		{URL: "http://x/", Connections: 4},
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

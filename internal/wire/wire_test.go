package wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
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

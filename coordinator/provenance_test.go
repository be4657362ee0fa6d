package coordinator

import (
	"regexp"
	"testing"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestPlanHash: the same plan hashes the same, another plan differently,
// in the documented form.
func TestPlanHash(t *testing.T) {
	a, err := planHash(&pb.Plan{Url: "https://127.0.0.1/", Connections: 4})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := planHash(&pb.Plan{Url: "https://127.0.0.1/", Connections: 4})
	other, _ := planHash(&pb.Plan{Url: "https://127.0.0.1/", Connections: 5})
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(a) || a != again || a == other {
		t.Errorf("hashes %q, %q (same plan), %q (other plan)", a, again, other)
	}
}

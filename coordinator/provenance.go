package coordinator

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// planHash returns RunResult.plan_hash of p: "sha256:" and the hex SHA-256
// of the deterministic protobuf encoding of p redacted (plan.Redacted: no
// key, no credential), body and CA included, so that runs of different
// bodies or CAs, which the stored plan leaves out (storedPlan), hash
// differently.
func planHash(p plan.Plan) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(wire.PlanToProto(plan.Redacted(p)))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// sortedIntervals returns an agent's kept intervals in index order (they
// arrive in it; a late one is put in its place).
func sortedIntervals(kept []*pb.AgentInterval) []*pb.AgentInterval {
	slices.SortStableFunc(kept, func(a, b *pb.AgentInterval) int { return int(a.GetIndex()) - int(b.GetIndex()) })
	return kept
}

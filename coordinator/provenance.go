package coordinator

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"google.golang.org/protobuf/proto"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// planHash returns RunResult.plan_hash of p (the redacted plan, body and
// CA still in it): "sha256:" and the hex SHA-256 of its deterministic
// protobuf encoding.
func planHash(p *pb.Plan) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
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

package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/cluster"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// KeyringCallTimeout bounds each member's part of a keyring operation.
const KeyringCallTimeout = 5 * time.Second

// memberKeys is one member's answer to a keyring operation: its keyring
// after it (primary first), or why it has none.
type memberKeys struct {
	meta *pb.NodeMeta
	keys [][]byte
	err  error
}

// Keyring applies one gossip keyring operation to every live member: this
// coordinator and each agent, as CoordinatorService.Keyring documents
// (the pre-checks of use and remove, one row per member, the errors); the
// other coordinators, if any, by their MemberKeyring.
// memberlist's keyring is local to each member; this is the fan-out that
// Serf does with its internal queries. A member that joins between the
// pre-check and the operation, or that is not reached, keeps its keys:
// list shows it.
func (c *Coordinator) Keyring(ctx context.Context, op pb.KeyringOp, key []byte) (*pb.KeyringResponse, error) {
	name := strings.ToLower(strings.TrimPrefix(op.String(), "KEYRING_OP_"))
	switch op {
	case pb.KeyringOp_KEYRING_OP_LIST:
		if len(key) != 0 {
			return nil, status.Error(codes.InvalidArgument, "keyring list takes no key")
		}
	case pb.KeyringOp_KEYRING_OP_INSTALL, pb.KeyringOp_KEYRING_OP_USE, pb.KeyringOp_KEYRING_OP_REMOVE:
		if len(key) != cluster.KeySize {
			return nil, status.Errorf(codes.InvalidArgument, "keyring %s: %v, not %d", name, cluster.ErrKeySize, len(key))
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "keyring op %v: want list, install, use or remove", op)
	}
	if c.cluster.Keys() == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "keyring %s: gossip encryption is off on coordinator %s (start every member with --gossip-key-file)", name, c.cfg.Name)
	}
	members := c.cluster.Members()
	fp := cluster.Fingerprint(key)
	switch op {
	case pb.KeyringOp_KEYRING_OP_USE:
		missing, unchecked := c.membersWhere(ctx, members, func(keys [][]byte) bool { return !hasKey(keys, key) })
		if len(missing) > 0 || len(unchecked) > 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "keyring use %s: %s; nothing changed (coordctl keyring install it first, then check coordctl keyring list)",
				fp, refusal("not installed on", missing, "could not check whether it is installed on", unchecked))
		}
	case pb.KeyringOp_KEYRING_OP_REMOVE:
		primary, unchecked := c.membersWhere(ctx, members, func(keys [][]byte) bool { return len(keys) > 0 && bytes.Equal(keys[0], key) })
		if len(primary) > 0 || len(unchecked) > 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "keyring remove %s: %s; nothing changed (coordctl keyring use another key first)",
				fp, refusal("it is the primary key of", primary, "could not check whether it is the primary key of", unchecked))
		}
	}
	answers := c.fanOut(ctx, members, op, key)
	resp := keyringResponse(answers)
	var failed []string
	for _, m := range resp.GetMembers() {
		if m.GetError() != "" {
			failed = append(failed, m.GetName())
		}
	}
	if op != pb.KeyringOp_KEYRING_OP_LIST {
		c.log.Info("gossip keyring operation", "op", name, "key", fp, "members", len(answers), "failed", failed)
	}
	return resp, nil
}

// membersWhere lists every member's keys and names those whose keys match,
// and those that did not answer, with why.
func (c *Coordinator) membersWhere(ctx context.Context, members []*pb.NodeMeta, match func(keys [][]byte) bool) (matched, unchecked []string) {
	for _, m := range c.fanOut(ctx, members, pb.KeyringOp_KEYRING_OP_LIST, nil) {
		switch {
		case m.err != nil:
			unchecked = append(unchecked, fmt.Sprintf("%s (%v)", m.meta.GetName(), m.err))
		case match(m.keys):
			matched = append(matched, m.meta.GetName())
		}
	}
	return matched, unchecked
}

// refusal joins a refused keyring operation's reasons: the members that
// matched (what), and those that could not be checked (how), each part only
// when it has members.
func refusal(what string, matched []string, how string, unchecked []string) string {
	var parts []string
	if len(matched) > 0 {
		parts = append(parts, what+" "+strings.Join(matched, ", "))
	}
	if len(unchecked) > 0 {
		parts = append(parts, how+" "+strings.Join(unchecked, ", "))
	}
	return strings.Join(parts, "; ")
}

// fanOut sends one keyring operation to each member in parallel, each
// bounded by KeyringCallTimeout, and returns their answers in the order of
// members.
func (c *Coordinator) fanOut(ctx context.Context, members []*pb.NodeMeta, op pb.KeyringOp, key []byte) []memberKeys {
	out := make([]memberKeys, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i].meta = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].keys, out[i].err = c.memberKeyring(ctx, m, op, key)
		}()
	}
	wg.Wait()
	return out
}

// memberKeyring applies op to one member: locally for this coordinator,
// by AgentService.Keyring for an agent, by CoordinatorService.MemberKeyring
// for another coordinator.
func (c *Coordinator) memberKeyring(ctx context.Context, m *pb.NodeMeta, op pb.KeyringOp, key []byte) ([][]byte, error) {
	if m.GetName() == c.cfg.Name {
		keys, err := c.cluster.Keyring(op, key)
		if err != nil {
			return nil, fmt.Errorf("%s", status.Convert(err).Message())
		}
		return keys, nil
	}
	creds := c.dialCreds
	if m.GetRole() == pb.Role_ROLE_COORDINATOR {
		creds = c.peerCreds
	}
	conn, err := grpc.NewClient(m.GetGrpcAddr(), creds)
	if err != nil {
		return nil, fmt.Errorf("address %s: %w", m.GetGrpcAddr(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, KeyringCallTimeout)
	defer cancel()
	var keys [][]byte
	if m.GetRole() == pb.Role_ROLE_COORDINATOR {
		var resp *pb.MemberKeyringResponse
		resp, err = pb.NewCoordinatorServiceClient(conn).MemberKeyring(ctx, &pb.MemberKeyringRequest{Op: op, Key: key})
		keys = resp.GetKeys()
	} else {
		var resp *pb.AgentServiceKeyringResponse
		resp, err = pb.NewAgentServiceClient(conn).Keyring(ctx, &pb.AgentServiceKeyringRequest{Op: op, Key: key})
		keys = resp.GetKeys()
	}
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return nil, fmt.Errorf("unreachable at %s: %s", m.GetGrpcAddr(), st.Message())
		case codes.Unimplemented:
			return nil, fmt.Errorf("version %s has no keyring operations", m.GetVersion())
		}
		return nil, fmt.Errorf("%s", st.Message())
	}
	return keys, nil
}

// keyringResponse builds the response from the members' answers: one row
// per member, and per key the members holding it, in the order first met
// (members by name, each member's primary first).
func keyringResponse(answers []memberKeys) *pb.KeyringResponse {
	resp := &pb.KeyringResponse{}
	index := map[string]*pb.KeyCount{}
	for _, a := range answers {
		row := &pb.KeyringMember{Name: a.meta.GetName(), Role: a.meta.GetRole()}
		if a.err != nil {
			row.Error = a.err.Error()
		}
		resp.Members = append(resp.Members, row)
		for i, k := range a.keys {
			kc, ok := index[string(k)]
			if !ok {
				kc = &pb.KeyCount{Key: k}
				index[string(k)] = kc
				resp.Keys = append(resp.Keys, kc)
			}
			kc.Members++
			if i == 0 {
				kc.Primary++
			}
		}
	}
	return resp
}

func hasKey(keys [][]byte, key []byte) bool {
	for _, k := range keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}

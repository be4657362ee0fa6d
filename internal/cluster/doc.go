// Package cluster wraps hashicorp/memberlist for Phalanx: every agent and
// coordinator is a member that advertises a NodeMeta (role, name, gRPC
// address, CPUs, version, state) in its memberlist node meta. It owns
// membership and gossip; it knows nothing of runs or plans.
package cluster

// Package agent is the Phalanx agent daemon: a cluster member that serves
// the Agent gRPC service and runs at most one share of one plan at a time
// through internal/engine.
//
// The coordinator drives a share through one bidirectional Run stream:
// Setup (the share), Accepted (the share checked: plan.Share.Check, the
// caps, the target resolved and admitted by the allowlist, internal/allow;
// nothing sent to it yet), Connect (once every agent of the run accepted),
// Ready (connections open), Start (the instant, in the agent's clock), then
// Interval messages and one Done. A refused share ends the stream with
// PermissionDenied (allowlist, caps) or InvalidArgument (a malformed
// share), and the agent keeps serving. The stream's end is
// the shutdown: when it ends or breaks (the coordinator died, or its host
// vanished and gRPC keepalive noticed), the agent closes every connection.
// The agent never imports the coordinator; they meet in proto.
package agent

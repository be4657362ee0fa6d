// Package agent is the Phalanx agent daemon: a cluster member that serves
// the Agent gRPC service and runs at most one share of one plan at a time
// through internal/engine.
//
// The coordinator drives a share through one bidirectional Run stream:
// Setup (the share), Ready (connections open), Start (the instant, in the
// agent's clock), then Interval messages and one Done. The stream's end is
// the shutdown: when it ends or breaks (the coordinator died, or its host
// vanished and gRPC keepalive noticed), the agent closes every connection.
// The agent never imports the coordinator; they meet in proto.
package agent

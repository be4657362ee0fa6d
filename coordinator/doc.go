// Package coordinator is the Phalanx coordinator daemon: a cluster member
// that keeps the live agent view from memberlist, serves the Coordinator gRPC
// service to coordctl, and executes runs.
//
// A run: validate the plan (a bad plan never reaches an agent), select
// agents, split the plan into shares, estimate each agent's clock offset
// (NTP-style, minimum-RTT sample), open one Run stream per agent and send its
// share, wait until every agent is Ready, send every agent one start instant
// translated into its own clock, then merge the agents' interval histograms
// exactly as they arrive. The coordinator never imports the agent; they meet
// in proto.
package coordinator

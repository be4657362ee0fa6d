// Package coordinator is the Phalanx coordinator daemon: a cluster member
// that keeps the live agent view from memberlist, serves the Coordinator gRPC
// service to coordctl, and executes runs.
//
// A run: validate the plan (a bad plan never reaches an agent), select
// agents, split the plan into shares, estimate each agent's clock offset
// (NTP-style, minimum-RTT sample), open one Run stream per agent and send its
// share, wait until every agent is Ready, send every agent one start instant
// translated into its own clock, then merge the agents' interval histograms
// exactly as they arrive (internal/merge). The coordinator never imports the
// agent (they meet in proto) nor the engine.
//
// The protocol steps, one file each: registry.go (runs in progress, StopRun,
// run IDs), prepare.go (agent selection, clock sync, shares, the Ready
// barrier, the start instant), loop.go (receive pumps and the run loop),
// result.go (the merged RunResult). Every goroutine a run starts is joined
// before RunPlanWith returns.
package coordinator

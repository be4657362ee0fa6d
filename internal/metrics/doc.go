// Package metrics owns the daemons' Prometheus metrics: the per-run series
// (Runs: requests, errors by kind, responses by status code, a latency
// histogram with classic and native buckets, target and achieved RPS,
// agents running and lost, per-agent CPU busy) and the HTTP server of
// /metrics (Server, with the safe default of internal/security). Names
// are in Names; README "Prometheus metrics" documents them with an example
// Grafana query.
//
// The agent feeds Runs with its own intervals (its share), the
// coordinator with its merged ones; each daemon adds its health metrics
// (runs, agents known, gossip members, stream errors) to the registry it
// serves. Per-run series are bounded: only the last Runs.Keep runs keep
// theirs (a run in progress is never dropped).
//
// It leaves measurement to the engine, which never imports it (make
// check), and the merge to internal/merge: it only reads intervals.
package metrics

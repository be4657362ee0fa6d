// Package threshold parses and evaluates pass/fail criteria on a run's
// merged measurements, as k6's thresholds do: "p99<3ms", "failed<0.1%",
// "rps>1000", "tls_full.p99<20ms", "stage2.p99<5ms". coordctl run
// --threshold and the coordinator's --abort-on-fail use it, and a capacity
// search's SLOs are the same expressions.
//
// It owns the grammar, the units and the evaluation on histograms and
// counters (internal/hist, internal/measure); it leaves where the data
// comes from (the window, a stage, one interval) to its callers, and
// imports neither gRPC nor protobuf.
package threshold

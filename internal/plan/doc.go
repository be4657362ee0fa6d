// Package plan owns the test plan: its Go model (with the load model as
// one explicit choice, ClosedLoop or OpenLoop, and the protocol as an enum,
// H1 or H2), defaults, validation (Check parses the URL once and returns
// the target), the YAML plan file, stage math (StageSpans, TargetAt, Ramp:
// the one home of stage boundaries and targets) and the exact split of a
// plan into per-agent shares and per-worker parts. It is pure: no I/O, no
// clocks. Wire conversion lives in internal/wire; execution in
// internal/engine.
package plan

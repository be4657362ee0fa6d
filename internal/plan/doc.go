// Package plan owns the test plan: its Go model, defaults, validation and the
// exact split of a plan into per-agent shares and per-worker parts. It is
// pure: no I/O, no clocks. Wire conversion lives in internal/wire; execution
// in internal/engine.
package plan

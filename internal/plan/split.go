package plan

import (
	"fmt"
	"strings"
)

// Split divides total into n parts that differ by at most one and sum to
// total exactly; the first total%n parts get the extra one (as k6's
// execution segments do, each part can be computed from (total, n, i)
// alone). It returns nil when n < 1.
func Split(total, n int) []int {
	if n < 1 {
		return nil
	}
	out := make([]int, n)
	for i := range out {
		out[i] = Part(total, n, i)
	}
	return out
}

// Part returns part i of Split(total, n).
func Part(total, n, i int) int {
	p := total / n
	if i < total%n {
		p++
	}
	return p
}

// Share is one agent's part of a plan.
type Share struct {
	// RunID names the run.
	RunID string
	// Plan is the whole plan.
	Plan Plan
	// Index is this share's position in [0, Count).
	Index int
	// Count is the number of shares.
	Count int
	// Connections is this agent's connections.
	Connections int
	// Requests is this agent's exact request count in count mode.
	Requests int64
	// Rate is this agent's part of the plan's rate (requests/s).
	Rate int64
	// MaxConnections is this agent's part of the connection cap.
	MaxConnections int
	// StageTargets are this agent's parts of the stage targets (rate or
	// connections, as the plan ramps).
	StageTargets []int64
}

// Shares splits p across n agents: ShareOf for each i.
func Shares(runID string, p Plan, n int) []Share {
	out := make([]Share, n)
	for i := range out {
		out[i] = ShareOf(runID, p, n, i)
	}
	return out
}

// ShareOf returns share i of p split across n agents (0 <= i < n), as
// Shares does, computed from (p, n, i) alone.
func ShareOf(runID string, p Plan, n, i int) Share {
	s := Share{RunID: runID, Plan: p, Index: i, Count: n,
		Connections: Part(p.Connections, n, i), Requests: int64(Part(int(p.Requests), n, i)),
		Rate: int64(Part(int(p.Rate), n, i)), MaxConnections: Part(p.MaxConnections, n, i)}
	for j := range p.Stages {
		s.StageTargets = append(s.StageTargets, int64(Part(int(p.StageTarget(j)), n, i)))
	}
	return s
}

// MaxRunIDLen bounds a share's run ID.
const MaxRunIDLen = 128

// Check validates a share that came from another machine: its plan
// (Check), its run ID (1 to MaxRunIDLen printable ASCII bytes), its place
// (0 <= Index < Count <= the plan's connections: every agent has a
// connection) and its parts, which must be exactly ShareOf's for that
// place, so that no agent runs more (or other) than its part. Errors name
// the first field that is wrong (and every plan problem, as Check does).
func (s *Share) Check() error {
	p := s.Plan
	if _, err := p.Check(); err != nil {
		return err
	}
	if s.RunID == "" || len(s.RunID) > MaxRunIDLen || strings.IndexFunc(s.RunID, func(r rune) bool { return r < '!' || r > '~' }) >= 0 {
		return fmt.Errorf("share: run_id %q: want 1 to %d printable ASCII bytes", s.RunID, MaxRunIDLen)
	}
	if s.Count < 1 || s.Count > p.Connections {
		return fmt.Errorf("share: count %d: want 1 to the plan's %d connections", s.Count, p.Connections)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("share: index %d: want 0 to %d (count %d)", s.Index, s.Count-1, s.Count)
	}
	want := ShareOf(s.RunID, p, s.Count, s.Index)
	for _, f := range []struct {
		field     string
		got, want int64
	}{
		{"connections", int64(s.Connections), int64(want.Connections)},
		{"requests", s.Requests, want.Requests},
		{"rate", s.Rate, want.Rate},
		{"max_connections", int64(s.MaxConnections), int64(want.MaxConnections)},
		{"stage_targets count", int64(len(s.StageTargets)), int64(len(want.StageTargets))},
	} {
		if f.got != f.want {
			return fmt.Errorf("share %d of %d: %s %d: want %d, this share's part of the plan", s.Index, s.Count, f.field, f.got, f.want)
		}
	}
	for j, t := range s.StageTargets {
		if t != want.StageTargets[j] {
			return fmt.Errorf("share %d of %d: stage_targets[%d] %d: want %d, this share's part of the plan", s.Index, s.Count, j, t, want.StageTargets[j])
		}
	}
	return nil
}

package plan

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

// Shares splits p across n agents.
func Shares(runID string, p Plan, n int) []Share {
	conns := Split(p.Connections, n)
	reqs := Split(int(p.Requests), n)
	rates := Split(int(p.Rate), n)
	maxConns := Split(p.MaxConnections, n)
	out := make([]Share, n)
	for i := range out {
		out[i] = Share{RunID: runID, Plan: p, Index: i, Count: n, Connections: conns[i], Requests: int64(reqs[i]),
			Rate: int64(rates[i]), MaxConnections: maxConns[i]}
		for j := range p.Stages {
			out[i].StageTargets = append(out[i].StageTargets, int64(Part(int(p.StageTarget(j)), n, i)))
		}
	}
	return out
}

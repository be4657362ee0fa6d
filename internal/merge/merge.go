package merge

import (
	"fmt"
	"sort"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// Interval is one agent's interval, as the merge takes it.
type Interval struct {
	// Agent is the agent's index, 0 <= Agent < the merger's agents.
	Agent int
	// Index is the interval's index k in the window.
	Index int
	// Start is the interval's start as an offset from the window's start
	// (the agent's own window start, in its clock); Length its length.
	Start, Length time.Duration
	// Histograms holds each kind's V2 encoding (compressed or not, as
	// hist.Decoder reads), indexed by hist.Kind. Empty bytes are invalid.
	Histograms [hist.NumKinds][]byte
	// Counts are the outcomes that ended in the interval.
	Counts *measure.Counts
	// CPUTime is the agent process's CPU time over the interval; CPUs its
	// usable CPUs (0: unknown, no busy fraction).
	CPUTime time.Duration
	CPUs    int
}

// Point is one interval of the timeline, merged across agents.
type Point struct {
	Index int
	// Start and Length: the interval's offset in the window and its
	// length (the longest any agent reported).
	Start, Length time.Duration
	// Requests, Errors and Missed sum the agents' counters.
	Requests, Errors, Missed int64
	// Connections sums the connections the agents opened in the interval
	// (their ConnectionsOpened: the achieved connection rate times the
	// length); AgentConnections has one entry per agent.
	Connections      int64
	AgentConnections []int64
	// GrowthRefused sums the agents' sends found late at the connection
	// cap (measure.Counts.GrowthRefused).
	GrowthRefused int64
	// Backlogged sums the agents' sends late for a busy connection
	// (measure.Counts.Backlogged).
	Backlogged int64
	// Latency is the merged latency histogram of the interval, V2
	// compressed (hist.Histogram.Encode).
	Latency []byte
	// Lateness is the merged send-lateness histogram of the interval, V2
	// compressed; nil in closed loop.
	Lateness []byte
	// Service is the merged service-time histogram of the interval (from
	// the actual send), V2 compressed; nil in closed loop.
	Service []byte
	// Phases holds, by hist.Kind, the merged phase histograms of the
	// interval (hist.Connect, TLSFull, TLSResumed, TTFB; V2 compressed),
	// each nil when no agent measured that phase in it; the other kinds are
	// nil.
	Phases [hist.NumKinds][]byte
	// P99 is the merged latency's 99th percentile in µs (0 when empty),
	// for live progress only: results render from Latency.
	P99 int64
	// TargetRPS is the plan's target rate at the interval's middle (open
	// loop only; 0 in closed loop); TargetConnections its connection
	// target there (closed loop only; 0 in open loop). In a partial point
	// both are the target of the agents not lost.
	TargetRPS         float64
	TargetConnections float64
	// CPUBusy has one entry per agent: its CPU time over the interval's
	// length times its CPUs, a 0-1 fraction (0 when not reported).
	CPUBusy []float64
	// Agents is the number of agents whose interval is merged in the
	// point. Partial is set when an agent that Lose removed is missing
	// from it: the point holds only the other agents' load.
	Agents  int
	Partial bool
	// Counts are the interval's merged outcomes, on the point Add or Lose
	// returns (for live progress); nil on Timeline's points.
	Counts *measure.Counts
}

// Stage is one plan stage's merged outcome.
type Stage struct {
	Index int
	// Start and Duration place the stage in the window (plan.StageSpans);
	// Cut shortens Duration for a run stopped early.
	Start, Duration time.Duration
	// From and To: the target ramp (rate or connections).
	From, To int64
	// Counts and Latency cover the intervals that start in the stage.
	Counts  measure.Counts
	Latency *hist.Histogram
}

// PhaseKinds are the phases a Point keeps per interval.
var PhaseKinds = []hist.Kind{hist.Connect, hist.TLSFull, hist.TLSResumed, hist.TTFB}

// pending is an interval some agent has sent and not every live agent:
// its histograms of every kind, summed over the agents merged in. The
// window's and the stages' histograms take them when it finishes (one
// dense add per kind and interval instead of one per agent-interval),
// and Total and Stages add those still pending.
type pending struct {
	hists    [hist.NumKinds]*hist.Accumulator
	counts   measure.Counts
	requests int64
	errors   int64
	missed   int64
	start    time.Duration
	length   time.Duration
	cpuBusy  []float64
	conns    []int64 // per agent
	// from marks the agents merged in; seen counts them, and lostSeen
	// those of them that were lost since.
	from     []bool
	seen     int
	lostSeen int
}

// Merger merges a run's intervals. It is not safe for concurrent use.
type Merger struct {
	p      plan.Plan
	agents int
	dec    hist.Decoder
	// total and stageLat accumulate the finished intervals' histograms,
	// the window's and each stage's latency, by bucket index, and counts
	// and stageCounts their counters (Total, Stages and Counts add the
	// pending intervals').
	total       [hist.NumKinds]hist.Accumulator
	stageLat    []hist.Accumulator
	counts      measure.Counts
	stageCounts []measure.Counts
	open        map[int]*pending
	free        []*hist.Accumulator
	points      map[int]*Point
	stages      []*Stage
	seen        [][]uint64 // per agent, a bit per interval index merged; check allocates it
	// lost marks the agents Lose removed; live counts the others.
	lost []bool
	live int
}

// New returns a merger for a run of plan p (defaults set) over agents
// agents.
func New(p plan.Plan, agents int) *Merger {
	m := &Merger{p: p, agents: agents, open: map[int]*pending{}, points: map[int]*Point{},
		lost: make([]bool, max(agents, 0)), live: agents}
	for i, sp := range p.StageSpans() {
		m.stages = append(m.stages, &Stage{Index: i, Start: sp.Start, Duration: sp.End - sp.Start, From: sp.From, To: sp.To, Latency: hist.New()})
	}
	m.stageLat = make([]hist.Accumulator, len(m.stages))
	m.stageCounts = make([]measure.Counts, len(m.stages))
	return m
}

// Add merges one agent's interval into the window's histograms and
// counters, the stage it starts in and its timeline point; it returns the
// point once every agent has sent interval iv.Index (else nil). Errors: an
// interval check refuses (agent, index out of the window or already sent
// by the agent, start, length, CPU time), a corrupt or
// foreign-geometry histogram, or a latency histogram whose sample count is
// not iv.Counts.Requests; nothing of iv is merged then.
func (m *Merger) Add(iv *Interval) (*Point, error) {
	if err := m.check(iv); err != nil {
		return nil, err
	}
	p, created := m.open[iv.Index], false
	if p == nil {
		p = &pending{start: iv.Start, length: iv.Length, cpuBusy: make([]float64, m.agents), conns: make([]int64, m.agents), from: make([]bool, m.agents)}
		for k := range p.hists {
			p.hists[k] = m.newHist()
		}
		created = true
	}
	// Decode each histogram straight into the interval's sums: the cost
	// follows the histograms' non-empty buckets, not their size.
	var totals [hist.NumKinds]int64
	var err error
	added := hist.Kind(0)
	for ; added < hist.NumKinds; added++ {
		if totals[added], err = m.dec.AddTo(iv.Histograms[added], p.hists[added]); err != nil {
			err = fmt.Errorf("interval %d %s histogram: %w", iv.Index, added, err)
			break
		}
	}
	if err == nil && totals[hist.Latency] != iv.Counts.Requests {
		err = fmt.Errorf("interval %d: latency histogram holds %d samples, counters say %d requests", iv.Index, totals[hist.Latency], iv.Counts.Requests)
	}
	if ok := totals[hist.OK]; err == nil && ok > totals[hist.Latency] {
		err = fmt.Errorf("interval %d: ok histogram holds %d samples, more than the latency histogram's %d", iv.Index, ok, totals[hist.Latency])
	}
	if err != nil {
		// The interval is merged whole or not at all: take out what was
		// added (the same bytes decode as before).
		for k := range added {
			_, _ = m.dec.SubtractFrom(iv.Histograms[k], p.hists[k])
		}
		if created {
			m.release(p)
		}
		return nil, err
	}
	// Nothing below fails.
	m.open[iv.Index] = p
	m.markSeen(iv.Agent, iv.Index) // merged from here on
	p.counts.Add(iv.Counts)
	p.requests += iv.Counts.Requests
	p.errors += iv.Counts.ErrorTotal()
	p.missed += iv.Counts.Missed
	p.conns[iv.Agent] += iv.Counts.ConnectionsOpened
	p.length = max(p.length, iv.Length)
	if iv.CPUs > 0 && iv.Length > 0 {
		p.cpuBusy[iv.Agent] = iv.CPUTime.Seconds() / (iv.Length.Seconds() * float64(iv.CPUs))
	}
	if !p.from[iv.Agent] {
		p.from[iv.Agent] = true
		p.seen++
		if m.lost[iv.Agent] {
			p.lostSeen++
		}
	}
	if p.seen-p.lostSeen < m.live {
		return nil, nil
	}
	return m.finish(iv.Index)
}

// Lose removes agent a from the intervals still to come: what it sent is
// kept, and an interval is complete once every other agent has sent it,
// so the timeline keeps flowing. It returns, in index order, the points
// that a's loss completed. The points a is missing from are Partial, with
// the other agents' target. Losing an agent twice changes nothing.
// Errors: a out of range, or a point's histogram that cannot be encoded.
func (m *Merger) Lose(a int) ([]*Point, error) {
	if a < 0 || a >= m.agents {
		return nil, fmt.Errorf("lose agent %d of %d", a, m.agents)
	}
	if m.lost[a] {
		return nil, nil
	}
	m.lost[a] = true
	m.live--
	var done []int
	for k, p := range m.open {
		if p.from[a] {
			p.lostSeen++
		}
		if p.seen-p.lostSeen >= m.live {
			done = append(done, k)
		}
	}
	sort.Ints(done)
	out := make([]*Point, 0, len(done))
	for _, k := range done {
		pt, err := m.finish(k)
		if err != nil {
			return out, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// stageOf returns the index of the stage interval k starts in (its start
// k × Interval: the agents' interval starts, which check bounds), or -1.
func (m *Merger) stageOf(k int) int {
	start := time.Duration(k) * m.p.Interval
	for i, st := range m.stages {
		if start >= st.Start && start < st.Start+st.Duration {
			return i
		}
	}
	return -1
}

// release empties p's histograms and keeps them for the next intervals.
func (m *Merger) release(p *pending) {
	for k, h := range p.hists {
		h.Reset()
		m.free = append(m.free, h)
		p.hists[k] = nil
	}
}

func (m *Merger) newHist() *hist.Accumulator {
	if n := len(m.free); n > 0 {
		h := m.free[n-1]
		m.free = m.free[:n-1]
		return h
	}
	return &hist.Accumulator{}
}

// finish turns interval k's pending merge into its timeline point.
func (m *Merger) finish(k int) (*Point, error) {
	p := m.open[k]
	delete(m.open, k)
	latency := p.hists[hist.Latency].Histogram()
	b, err := latency.Encode()
	if err != nil {
		return nil, fmt.Errorf("interval %d: %w", k, err)
	}
	pt := &Point{
		Index: k, Start: p.start, Length: p.length,
		Requests: p.requests, Errors: p.errors, Missed: p.missed, CPUBusy: p.cpuBusy,
		Latency: b, Agents: p.seen, AgentConnections: p.conns, GrowthRefused: p.counts.GrowthRefused,
		Backlogged: p.counts.Backlogged,
	}
	for _, n := range p.conns {
		pt.Connections += n
	}
	if latency.Count() > 0 {
		pt.P99 = latency.ValueAtPercentile(99)
	}
	for a, lost := range m.lost {
		if lost && !p.from[a] {
			pt.Partial = true
		}
	}
	target := m.targetAt(p.start+p.length/2, p.from)
	if m.p.OpenLoop() {
		pt.TargetRPS = target
		if pt.Lateness, err = p.hists[hist.Lateness].Histogram().Encode(); err != nil {
			return nil, fmt.Errorf("interval %d: %w", k, err)
		}
		if pt.Service, err = p.hists[hist.Service].Histogram().Encode(); err != nil {
			return nil, fmt.Errorf("interval %d: %w", k, err)
		}
	} else {
		pt.TargetConnections = target
	}
	for _, kind := range PhaseKinds {
		if h := p.hists[kind]; h.Count() > 0 {
			if pt.Phases[kind], err = h.Histogram().Encode(); err != nil {
				return nil, fmt.Errorf("interval %d %s: %w", k, kind, err)
			}
		}
	}
	for kind, h := range p.hists {
		if h.Count() > 0 {
			m.total[kind].Merge(h)
		}
	}
	m.counts.Add(&p.counts)
	if i := m.stageOf(k); i >= 0 {
		m.stageLat[i].Merge(p.hists[hist.Latency])
		m.stageCounts[i].Add(&p.counts)
	}
	m.release(p)
	kept := *pt // the timeline keeps no counters: they are in the window's
	m.points[k] = &kept
	pt.Counts = &p.counts
	return pt, nil
}

// targetAt returns the plan's target at offset t of the window (rate or
// connections), less the parts (plan.Shares) of the lost agents missing
// from an interval (from marks those merged in).
func (m *Merger) targetAt(t time.Duration, from []bool) float64 {
	missing := false
	for a, lost := range m.lost {
		missing = missing || lost && !from[a]
	}
	if !missing {
		return m.p.TargetAt(t)
	}
	var base float64
	targets := make([]float64, len(m.p.Stages))
	durs := make([]time.Duration, len(m.p.Stages))
	for a, lost := range m.lost {
		if lost && !from[a] {
			continue
		}
		base += float64(plan.Part(int(m.p.BaseTarget()), m.agents, a))
		for j := range m.p.Stages {
			targets[j] += float64(plan.Part(int(m.p.StageTarget(j)), m.agents, a))
		}
	}
	for j, st := range m.p.Stages {
		durs[j] = st.Duration
	}
	return plan.Ramp(base, durs, targets, t)
}

// Timeline finishes intervals some agent never sent (it failed) and
// returns every point in index order.
func (m *Merger) Timeline() ([]*Point, error) {
	for k := range m.open {
		if _, err := m.finish(k); err != nil {
			return nil, err
		}
	}
	out := make([]*Point, 0, len(m.points))
	for _, pt := range m.points {
		out = append(out, pt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// Total returns the window's merged histograms (every interval of every
// agent merged so far), built anew at each call.
func (m *Merger) Total() *hist.Set {
	s := hist.NewSet()
	for k := range hist.NumKinds {
		sum := &m.total[k]
		if len(m.open) > 0 {
			sum = new(hist.Accumulator)
			sum.Merge(&m.total[k])
			for _, p := range m.open {
				sum.Merge(p.hists[k])
			}
		}
		s.Put(k, sum.Histogram())
	}
	return s
}

// Counts returns the window's merged counters (Issued is 0: see
// measure.Counts).
func (m *Merger) Counts() measure.Counts {
	c := m.counts
	for _, p := range m.open {
		c.Add(&p.counts)
	}
	return c
}

// Stages returns the stages in order, with their merged counters and
// latency (nil without stages). Each call rebuilds their Counts and
// Latency from what was merged so far.
func (m *Merger) Stages() []*Stage {
	for i, st := range m.stages {
		sum := &m.stageLat[i]
		st.Counts = m.stageCounts[i]
		for k, p := range m.open {
			if m.stageOf(k) == i {
				if sum == &m.stageLat[i] {
					sum = new(hist.Accumulator)
					sum.Merge(&m.stageLat[i])
				}
				sum.Merge(p.hists[hist.Latency])
				st.Counts.Add(&p.counts)
			}
		}
		st.Latency = sum.Histogram()
	}
	return m.stages
}

// Window returns a run's measurement window: planned, unless an agent
// reported its window's end (ends: each such agent's end as an offset
// from its window's start) and either one is after the start or the run
// was stopped early (a window stopped before anything ended in it is
// empty): then the latest end.
func Window(planned time.Duration, ends []time.Duration, stopped bool) time.Duration {
	var w time.Duration
	for _, e := range ends {
		w = max(w, e)
	}
	if w > 0 || len(ends) > 0 && stopped {
		return w
	}
	return planned
}

// Cut shortens stages to a window stopped early at window: each keeps the
// part that ran (so its rates are over the time it had), later stages
// become empty.
func Cut(stages []*Stage, window time.Duration) {
	for _, st := range stages {
		st.Duration = min(max(window-st.Start, 0), st.Duration)
	}
}

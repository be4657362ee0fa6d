package metrics

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

// Namespace prefixes every Phalanx metric name.
const Namespace = "phalanx"

// DefaultKeep is how many runs keep their series by default (Runs.Keep).
const DefaultKeep = 10

// RunLabels are the labels of a run's series. The label names are
// runLabelNames, in the order of values: adding a label (a run's tag, say)
// is a field here, a name there and a value in values.
type RunLabels struct {
	// ID is the run ID (label run_id).
	ID string
}

// runLabelNames names RunLabels' labels, in values' order.
var runLabelNames = []string{"run_id"}

func (l RunLabels) values() []string { return []string{l.ID} }

// Interval is one interval of a run as a daemon measured it: an agent's
// own (its share), or the coordinator's merge across agents.
type Interval struct {
	// Length is the interval's length (the achieved RPS is Requests over it).
	Length time.Duration
	// Counts are the outcomes that ended in the interval.
	Counts *measure.Counts
	// Latency is the interval's latency histogram (µs), HdrHistogram V2,
	// compressed or not (hist.Decoder); nil or empty for none.
	Latency []byte
	// TargetRPS is the plan's target rate at the interval's middle (open
	// loop; 0 in closed loop or when the daemon does not know it).
	TargetRPS float64
	// CPUBusy is each agent's busy fraction (0-1) of its usable CPUs in
	// the interval, in the order of the agents given to Runs.Start.
	CPUBusy []float64
	// Agents is how many agents the interval holds (the agents running).
	Agents int
}

// Runs is the per-run part of a daemon's metrics, a prometheus.Collector.
// Only the Keep runs started last keep their series: a run that ended
// drops out when Keep newer runs have started; a run in progress never
// does. It is safe for concurrent use.
type Runs struct {
	// Keep bounds the runs that keep their series (the cardinality:
	// each run has about 25 series, plus one per status code seen and one
	// per agent). Set by NewRuns; at least 1.
	Keep int

	mu   sync.Mutex
	runs []*Run // in start order, oldest first
	d    descs
}

// NewRuns returns an empty Runs keeping the series of the last keep runs
// (DefaultKeep when keep < 1).
func NewRuns(keep int) *Runs {
	if keep < 1 {
		keep = DefaultKeep
	}
	return &Runs{Keep: keep, d: newDescs()}
}

// Run is one run's series; its methods are safe for concurrent use, and
// do nothing on a nil *Run (a daemon without metrics).
type Run struct {
	rs      *Runs
	labels  []string
	started time.Time
	agents  []string

	// Guarded by rs.mu.
	counts    measure.Counts
	latency   map[int64]int64 // latency histogram: lowest value of an HdrHistogram bucket (µs) → count
	dec       hist.Decoder
	sparse    hist.Sparse
	targetRPS float64
	achieved  float64
	cpuBusy   []float64
	running   int
	lost      int
	ended     bool
}

// Start adds a run's series, labelled by l, with its agents (in the order
// of Interval.CPUBusy; every agent counts as running until an interval
// says otherwise), and drops the series of runs beyond Keep.
func (rs *Runs) Start(l RunLabels, agents []string) *Run {
	if rs == nil {
		return nil
	}
	r := &Run{rs: rs, labels: l.values(), started: time.Now(), agents: agents, latency: map[int64]int64{},
		running: len(agents), cpuBusy: make([]float64, len(agents))}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.runs = append(rs.runs, r)
	// Drop the oldest ended runs beyond Keep.
	excess := len(rs.runs) - rs.Keep
	kept := rs.runs[:0]
	for _, o := range rs.runs {
		if excess > 0 && o.ended {
			excess--
			continue
		}
		kept = append(kept, o)
	}
	clear(rs.runs[len(kept):])
	rs.runs = kept
	return r
}

// Interval adds one interval of the run. Errors: a latency histogram that
// does not decode (its counters are still added).
func (r *Run) Interval(iv Interval) error {
	if r == nil {
		return nil
	}
	r.rs.mu.Lock()
	defer r.rs.mu.Unlock()
	if iv.Counts != nil {
		r.counts.Add(iv.Counts)
		if iv.Length > 0 {
			r.achieved = float64(iv.Counts.Requests) / iv.Length.Seconds()
		}
	}
	r.targetRPS = iv.TargetRPS
	copy(r.cpuBusy, iv.CPUBusy)
	r.running = iv.Agents
	if len(iv.Latency) == 0 {
		return nil
	}
	if err := r.dec.Decode(iv.Latency, &r.sparse); err != nil {
		return fmt.Errorf("metrics: latency histogram: %w", err)
	}
	for i, v := range r.sparse.Values {
		r.latency[v] += r.sparse.Counts[i]
	}
	return nil
}

// Lost counts one agent of the run lost: one fewer running.
func (r *Run) Lost() {
	if r == nil {
		return
	}
	r.rs.mu.Lock()
	r.lost++
	r.running = max(r.running-1, 0)
	r.rs.mu.Unlock()
}

// End marks the run ended: no agent runs; its series stay until Keep newer
// runs have started.
func (r *Run) End() {
	if r == nil {
		return
	}
	r.rs.mu.Lock()
	r.ended, r.running = true, 0
	r.rs.mu.Unlock()
}

// descs are Runs' metric descriptions. The names are in Names.
type descs struct {
	requests, responses, errors, bytes, missed, latency *prometheus.Desc
	target, achieved, running, lost, cpuBusy, active    *prometheus.Desc
}

func newDescs() descs {
	with := func(extra ...string) []string { return append(append([]string{}, runLabelNames...), extra...) }
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "run", name), help, labels, nil)
	}
	return descs{
		requests:  d("requests_total", "Completed responses (any status code) in the run's window.", with()),
		responses: d("responses_total", "Completed responses by HTTP status code.", with("code")),
		errors:    d("errors_total", "Failed requests by error kind (connect, tls, timeout, reset, closed, truncated, protocol, local, refused).", with("kind")),
		bytes:     d("read_bytes_total", "Response bytes read from the wire (status line, headers, framing, body).", with()),
		missed:    d("missed_total", "Open-loop sends started more than 5 ms late or never sent.", with()),
		latency:   d("latency_seconds", "Latency of completed responses: request start (open loop: intended send time) to last byte.", with()),
		target:    d("target_rps", "The plan's target rate at the last interval's middle, requests/s (open loop; 0 in closed loop).", with()),
		achieved:  d("achieved_rps", "Completed responses per second in the last interval.", with()),
		running:   d("agents_running", "Agents whose load is in the last interval.", with()),
		lost:      d("agents_lost", "Agents the run lost.", with()),
		cpuBusy:   d("agent_cpu_busy_ratio", "Busy fraction (0-1) of an agent's usable CPUs in the last interval.", with("agent")),
		active:    d("running", "1 while the run is in progress, 0 once it has ended.", with()),
	}
}

// Describe implements prometheus.Collector.
func (rs *Runs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rs.d.requests, rs.d.responses, rs.d.errors, rs.d.bytes, rs.d.missed, rs.d.latency,
		rs.d.target, rs.d.achieved, rs.d.running, rs.d.lost, rs.d.cpuBusy, rs.d.active} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (rs *Runs) Collect(ch chan<- prometheus.Metric) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.runs {
		r.collect(ch)
	}
}

// collect sends r's series; rs.mu is held.
func (r *Run) collect(ch chan<- prometheus.Metric) {
	d, lv := &r.rs.d, r.labels
	counter := func(desc *prometheus.Desc, v int64, extra ...string) {
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(desc, prometheus.CounterValue, float64(v), r.started, append(append([]string{}, lv...), extra...)...)
	}
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append(append([]string{}, lv...), extra...)...)
	}
	c := &r.counts
	counter(d.requests, c.Requests)
	for code, n := range c.Status {
		if n > 0 {
			counter(d.responses, n, strconv.Itoa(code))
		}
	}
	for k := range measure.NumErrorKinds {
		counter(d.errors, c.Errors[k], k.String())
	}
	counter(d.bytes, c.BytesRead)
	counter(d.missed, c.Missed)
	ch <- latencyHistogram(d.latency, r.latency, r.started, lv)
	gauge(d.target, r.targetRPS)
	gauge(d.achieved, r.achieved)
	gauge(d.running, float64(r.running))
	gauge(d.lost, float64(r.lost))
	for i, a := range r.agents {
		gauge(d.cpuBusy, r.cpuBusy[i], a)
	}
	active := 1.0
	if r.ended {
		active = 0
	}
	gauge(d.active, active)
}

// sortedKeys returns m's keys in increasing order.
func sortedKeys(m map[int64]int64) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

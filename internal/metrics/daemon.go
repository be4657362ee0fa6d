package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Run results, the values of phalanx_runs_total's result label.
const (
	ResultOK           = "ok"            // the whole run, as planned
	ResultPartial      = "partial"       // an agent lost (coordinator), or the share's stream lost (agent)
	ResultStoppedEarly = "stopped_early" // StopRun (Ctrl-C) ended the window early
	ResultFailed       = "failed"        // refused or failed before a result
)

// Daemon is a daemon's metrics: its per-run series (Runs), its own health
// (runs by result, runs in progress, stream errors, gossip members) and
// Go's runtime and process collectors, in one registry to serve. A nil
// *Daemon (no --metrics-addr) takes every call and records nothing.
type Daemon struct {
	// Registry holds every collector below.
	Registry *prometheus.Registry
	// Runs are the per-run series.
	Runs *Runs

	runsTotal    *prometheus.CounterVec
	inProgress   prometheus.Gauge
	streamErrors prometheus.Counter
}

// NewDaemon returns the metrics of a daemon keeping keep runs' series
// (NewRuns), whose gossip member count (live members, itself included) is
// gossipMembers, plus the daemon's own collectors (extra).
func NewDaemon(keep int, gossipMembers func() float64, extra ...prometheus.Collector) *Daemon {
	d := &Daemon{
		Registry: prometheus.NewRegistry(),
		Runs:     NewRuns(keep),
		runsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "runs_total",
			Help: "Runs (an agent: shares) ended, by result: ok, partial, stopped_early, failed."}, []string{"result"}),
		inProgress: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "runs_in_progress",
			Help: "Runs (an agent: shares) in progress."}),
		streamErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "stream_errors_total",
			Help: "Run streams that ended before their result: the coordinator's to an agent, an agent's from its coordinator."}),
	}
	for _, r := range []string{ResultOK, ResultPartial, ResultStoppedEarly, ResultFailed} {
		d.runsTotal.WithLabelValues(r) // every result shows, at 0 until it happens
	}
	d.Registry.MustRegister(d.Runs, d.runsTotal, d.inProgress, d.streamErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "gossip_members",
			Help: "Live members of the gossip cluster (agents and coordinators), this one included."}, gossipMembers),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.Registry.MustRegister(extra...)
	return d
}

// StartRun adds a run in progress labelled l over agents (Runs.Start).
func (d *Daemon) StartRun(l RunLabels, agents []string) *Run {
	if d == nil {
		return nil
	}
	d.inProgress.Inc()
	return d.Runs.Start(l, agents)
}

// EndRun ends run r (from StartRun) with result (Result*).
func (d *Daemon) EndRun(r *Run, result string) {
	if d == nil {
		return
	}
	r.End()
	d.inProgress.Dec()
	d.runsTotal.WithLabelValues(result).Inc()
}

// StreamError counts a run stream that ended before its result.
func (d *Daemon) StreamError() {
	if d != nil {
		d.streamErrors.Inc()
	}
}

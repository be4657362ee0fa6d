package coordinator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/phalanxload/phalanx/internal/metrics"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// setupMetrics makes the coordinator's metrics and binds their /metrics
// server when Config.MetricsAddr is set (checked by checkMetrics before
// anything was bound); without it, c.metrics stays nil and records nothing.
// Besides metrics.Daemon's, the coordinator has phalanx_agents_known.
func (c *Coordinator) setupMetrics() error {
	if c.cfg.MetricsAddr == "" {
		return nil
	}
	c.metrics = metrics.NewDaemon(c.cfg.MetricsRuns,
		func() float64 { return float64(len(c.cluster.Members())) },
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "agents_known",
			Help: "Live agents in the coordinator's gossip view."}, func() float64 { return float64(len(c.Agents())) }))
	srv, err := metrics.Listen(c.cfg.MetricsAddr, c.metrics.Registry, c.cfg.Security, c.log)
	if err != nil {
		return err
	}
	c.metricsSrv = srv
	return nil
}

// MetricsAddr returns the bound /metrics address, "" without one.
func (c *Coordinator) MetricsAddr() string { return c.metricsSrv.Addr() }

// startMetrics adds the per-run series of run rn.
func (rn *run) startMetrics() {
	names := make([]string, len(rn.agents))
	for i, r := range rn.agents {
		names[i] = r.meta.GetName()
	}
	rn.metrics = rn.c.metrics.StartRun(metrics.RunLabels{ID: rn.id}, names)
}

// endMetrics ends the per-run series of rn, counting the run by its
// result res (nil with err when it failed).
func (rn *run) endMetrics(res *pb.RunResult, err error) {
	result := metrics.ResultOK
	switch {
	case err != nil || res == nil:
		result = metrics.ResultFailed
	case res.GetPartial():
		result = metrics.ResultPartial
	case res.GetStoppedEarly():
		result = metrics.ResultStoppedEarly
	}
	rn.c.metrics.EndRun(rn.metrics, result)
}

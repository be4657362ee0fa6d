package agent

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// agentStates are the states phalanx_agent_state shows, in order.
var agentStates = []pb.AgentState{pb.AgentState_AGENT_STATE_IDLE, pb.AgentState_AGENT_STATE_PREPARING,
	pb.AgentState_AGENT_STATE_READY, pb.AgentState_AGENT_STATE_RUNNING, pb.AgentState_AGENT_STATE_DRAINING}

// stateName is a state as coordctl agents shows it: "idle", "running".
func stateName(s pb.AgentState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "AGENT_STATE_"))
}

// setupMetrics makes the agent's metrics and binds their /metrics server
// when Config.MetricsAddr is set (checked before anything was bound);
// without it, a.metrics stays nil and records nothing. Besides
// metrics.Daemon's, the agent has phalanx_agent_state.
func (a *Agent) setupMetrics() error {
	if a.cfg.MetricsAddr == "" {
		return nil
	}
	a.stateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "agent_state",
		Help: "1 for the agent's state (idle, preparing, ready, running, draining), 0 for the others."}, []string{"state"})
	a.metrics = metrics.NewDaemon(a.cfg.MetricsRuns, func() float64 { return float64(len(a.cluster.Members())) }, a.stateGauge)
	a.noteState(pb.AgentState_AGENT_STATE_IDLE)
	srv, err := metrics.Listen(a.cfg.MetricsAddr, a.metrics.Registry, a.cfg.Security, a.log)
	if err != nil {
		return err
	}
	a.metricsSrv = srv
	return nil
}

// MetricsAddr returns the bound /metrics address, "" without one.
func (a *Agent) MetricsAddr() string { return a.metricsSrv.Addr() }

// noteState shows state s on phalanx_agent_state.
func (a *Agent) noteState(s pb.AgentState) {
	if a.stateGauge == nil {
		return
	}
	for _, o := range agentStates {
		v := 0.0
		if o == s {
			v = 1
		}
		a.stateGauge.WithLabelValues(stateName(o)).Set(v)
	}
}

// shareTargetAt returns share s's target rate at offset t of the window
// (open loop; 0 in closed loop), its part of plan.Plan.TargetAt.
func shareTargetAt(s plan.Share, t time.Duration) float64 {
	if !s.Plan.OpenLoop() {
		return 0
	}
	durs := make([]time.Duration, len(s.Plan.Stages))
	targets := make([]float64, len(s.Plan.Stages))
	for i, st := range s.Plan.Stages {
		durs[i] = st.Duration
		if i < len(s.StageTargets) {
			targets[i] = float64(s.StageTargets[i])
		}
	}
	return plan.Ramp(float64(s.Rate), durs, targets, t)
}

// shareResult is the result label of a share that returned err: lost
// when its stream ended under it (or a send failed), stopped early when
// a Stop shortened its window.
func shareResult(err error, lostStream, stoppedEarly bool) string {
	switch {
	case lostStream:
		return metrics.ResultPartial
	case err != nil:
		return metrics.ResultFailed
	case stoppedEarly:
		return metrics.ResultStoppedEarly
	}
	return metrics.ResultOK
}

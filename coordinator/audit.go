package coordinator

import (
	"log/slog"
	"time"

	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// The coordinator logs every run it is given, an audit trail of what was
// loaded and how it went: "run accepted" with its target (credentials
// redacted: plan.Redacted), load and agents, then "run ended" with its
// outcome; a plan refused before it became a run logs "run refused".

// planAttrs are the log attributes that say what p loads: the target (the
// URL, redacted), the load model and its size, the window.
func planAttrs(p plan.Plan) []any {
	r := plan.Redacted(p)
	attrs := []any{"target", r.URL, "method", r.Method, "load", p.Load.String(), "connections", p.Connections}
	if p.OpenLoop() {
		attrs = append(attrs, "rate", p.Rate)
	}
	if p.Requests > 0 {
		attrs = append(attrs, "requests", p.Requests)
	}
	if p.Duration > 0 {
		attrs = append(attrs, "duration", p.Duration.String())
	}
	if len(p.Stages) > 0 {
		attrs = append(attrs, "stages", len(p.Stages))
	}
	if len(p.Mix) > 0 {
		attrs = append(attrs, "mix_requests", len(p.Mix))
	}
	return attrs
}

// logRefused logs a plan refused before it became a run (invalid, or no
// agents to run it).
func (c *Coordinator) logRefused(p plan.Plan, err error) {
	c.log.Warn("run refused", append(planAttrs(p), "err", status.Convert(err).Message())...)
}

// logStart logs the run as accepted, before its agents prepare: its target,
// load and agents ("run started" follows at the start instant).
func (rn *run) logStart() {
	names := make([]string, len(rn.agents))
	for i, r := range rn.agents {
		names[i] = r.meta.GetName()
	}
	rn.log.Info("run accepted", append(planAttrs(rn.p), "agents", names)...)
}

// logEnd logs the run's end: its outcome (complete, stopped_early,
// partial, aborted, or failed with the error), with the requests completed
// and the window when there is a result. began is when logStart ran.
func (rn *run) logEnd(res *pb.RunResult, err error, began time.Time) {
	outcome := "complete"
	switch {
	case err != nil:
		outcome = "failed"
	case res.GetAborted():
		outcome = "aborted"
	case res.GetPartial():
		outcome = "partial"
	case res.GetStoppedEarly():
		outcome = "stopped_early"
	}
	attrs := []any{"outcome", outcome, "target", plan.Redacted(rn.p).URL, "took", time.Since(began).Round(time.Millisecond).String()}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, "err", status.Convert(err).Message())
	} else {
		attrs = append(attrs, "requests", res.GetCounters().GetRequests(), "window", res.GetWindow().AsDuration().String())
	}
	rn.log.Log(rn.ctx, level, "run ended", attrs...)
}

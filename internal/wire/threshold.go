package wire

import (
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/threshold"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// ThresholdsToProto converts threshold outcomes to the result's.
func ThresholdsToProto(rs []threshold.Result) []*pb.ThresholdResult {
	out := make([]*pb.ThresholdResult, 0, len(rs))
	for _, r := range rs {
		out = append(out, &pb.ThresholdResult{Threshold: r.Threshold, Value: r.Value, Unit: r.Unit, Pass: r.Pass, NoData: r.NoData,
			Limit: r.Limit, Metric: r.Metric, Percentile: r.Percentile})
	}
	return out
}

// VerdictFromProto returns the report's view of result r's thresholds and
// threshold abort.
func VerdictFromProto(r *pb.RunResult) report.Verdict {
	v := report.Verdict{AbortedByThreshold: r.GetAbortedByThreshold()}
	if r.GetAbortedByThreshold() != "" {
		v.AbortedAtS = r.GetAbortedAt().AsDuration().Seconds()
	}
	for _, t := range r.GetThresholds() {
		tr := report.ThresholdResult{Threshold: t.GetThreshold(), Unit: t.GetUnit(), Pass: t.GetPass(), NoData: t.GetNoData(),
			Limit: t.GetLimit(), Metric: t.GetMetric(), Percentile: t.GetPercentile()}
		if t.GetUnit() == threshold.UnitMicros {
			tr.LimitUs = t.GetLimit()
		}
		if !t.GetNoData() {
			val := t.GetValue()
			tr.Value = &val
		}
		v.Thresholds = append(v.Thresholds, tr)
	}
	return v
}

package report

import (
	"fmt"
	"strings"
)

// Verdict is what a run's thresholds (coordctl run --threshold) said, and
// whether one ended it (--abort-on-fail). Report embeds it: its JSON
// fields are the report's.
type Verdict struct {
	// Thresholds are the outcomes, in the order given.
	Thresholds []ThresholdResult `json:"thresholds,omitempty"`
	// AbortedByThreshold names the threshold whose failure ended the run
	// early; AbortedAtS is when, in seconds from the window's start. The
	// report then covers the shortened window only.
	AbortedByThreshold string  `json:"aborted_by_threshold,omitempty"`
	AbortedAtS         float64 `json:"aborted_at_s,omitempty"`
}

// ThresholdResult is one threshold's outcome over the window. Value and
// Limit are in Unit: "us" for latencies, "ratio" (0-1) for an error rate,
// "count", "rps"; Value is null when the window held no sample of the
// metric (NoData: then it fails). Metric is what it reads (a histogram's
// name such as "latency" or "tls_full", or "rps", "errors": the Errors
// line's count, "failed": errors plus non-2xx/3xx responses), Percentile
// the pNN of a percentile threshold, LimitUs the bound of a latency one
// (the HTML report draws a latency percentile's as its SLO line).
type ThresholdResult struct {
	Threshold  string   `json:"threshold"`
	Value      *float64 `json:"value"`
	Limit      float64  `json:"limit"`
	Unit       string   `json:"unit"`
	Pass       bool     `json:"pass"`
	NoData     bool     `json:"no_data,omitempty"`
	Metric     string   `json:"metric"`
	Percentile float64  `json:"percentile,omitempty"`
	LimitUs    float64  `json:"limit_us,omitempty"`
}

// Failed returns the thresholds that failed.
func (v *Verdict) Failed() []string {
	var out []string
	for _, t := range v.Thresholds {
		if !t.Pass {
			out = append(out, t.Threshold)
		}
	}
	return out
}

// Labels are what the user attached to a stored run (coordctl run --tag,
// --note) and the capacity search it belongs to. Report embeds it.
type Labels struct {
	Tags     []string `json:"tags,omitempty"`
	Note     string   `json:"note,omitempty"`
	SearchID string   `json:"search_id,omitempty"`
}

// writeAbort writes the line saying a threshold ended the run early.
func (r *Report) writeAbort(p *printer) {
	if r.AbortedByThreshold == "" {
		return
	}
	of := ""
	if r.PlanDurationS > 0 {
		of = " of " + fmtWindow(r.PlanDurationS)
	}
	p.f("  Aborted by threshold %s (--abort-on-fail) at %s; the report covers the %s that ran%s\n",
		r.AbortedByThreshold, fmtSeconds(r.AbortedAtS), fmtSeconds(r.DurationS), of)
}

// writeThresholds writes one line per threshold: its value and verdict.
func (r *Report) writeThresholds(p *printer) {
	if len(r.Thresholds) == 0 {
		return
	}
	failed := len(r.Failed())
	p.f("Thresholds: %d of %d passed\n", len(r.Thresholds)-failed, len(r.Thresholds))
	for _, t := range r.Thresholds {
		verdict := "pass"
		if !t.Pass {
			verdict = "FAIL"
		}
		p.f("  %-4s %-24s %s%s\n", verdict, t.Threshold, fmtThresholdValue(t), countsWhat[t.Metric])
	}
}

// countsWhat says, after a threshold's value, what its error metric
// counted: the report's own lines, so that errors and failed read apart.
var countsWhat = map[string]string{
	"errors": " (errors: the Errors line, requests without a response)",
	"failed": " (failed: Errors plus Non-2xx or 3xx responses)",
}

// fmtThresholdValue formats a threshold's value in its unit.
func fmtThresholdValue(t ThresholdResult) string {
	if t.Value == nil {
		return "no samples"
	}
	v := *t.Value
	switch t.Unit {
	case "us":
		return fmtUs(v)
	case "ratio":
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", 100*v), "0"), ".") + "%"
	case "rps":
		return fmt.Sprintf("%.2f req/s", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprint(v)
}

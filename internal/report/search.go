package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Search is a capacity search's result (coordctl search, internal/search):
// the knee, every step, and the throughput-latency curve. Its JSON field
// names are part of the interface (README "Capacity search"); a renderer
// of another format (the HTML page) reads this model.
type Search struct {
	SearchID string `json:"search_id"`
	URL      string `json:"url"`
	// Mode is "open" (the searched variable is the rate, requests/s) or
	// "closed" (the connections); Unit names it ("requests/s",
	// "connections").
	Mode string `json:"mode"`
	Unit string `json:"unit"`
	// PacingWindowUs and PacingSpin are the open-loop steps' pacing, as
	// the plan set it (--pacing-window, in µs; --pacing-spin); omitted
	// when 0 and false (each request at its own instant, no spin).
	PacingWindowUs int64 `json:"pacing_window_us,omitempty"`
	PacingSpin     bool  `json:"pacing_spin,omitempty"`
	// SLOs are the objectives every passing step held, as given.
	SLOs []string `json:"slos"`
	// RangeFrom and RangeTo bound the search; Precision is the bisection's
	// stopping width, a fraction of the lower bound (0.02: 2 %).
	RangeFrom float64 `json:"range_from"`
	RangeTo   float64 `json:"range_to"`
	Precision float64 `json:"precision"`
	Repeats   int     `json:"repeats"`
	// Outcome is "found" (a knee inside the range), "above_range" (every
	// SLO held at RangeTo), "below_range" (the first step failed),
	// "inconclusive" (a client-bound or short step: the cluster is too
	// small for the answer) or "stopped" (Ctrl-C, --max-steps or
	// --max-time before an answer); Message says it in words.
	Outcome string `json:"outcome"`
	Message string `json:"message"`
	// Knee is the estimated highest load at which every SLO holds, with
	// its confidence interval [KneeLo, KneeHi] at KneeConfidence (0-1);
	// zero when Outcome is not "found". Passing and Failing are the
	// bracket's repeated steps: the highest load that passed when first
	// run and the lowest that failed; PassingHeld and FailingBroke how
	// many of their runs (Repeats each) held every SLO at Passing and broke
	// one at Failing: a repeat may pass at Failing or fail at Passing, and
	// then the knee's estimate extrapolates beyond the bracket.
	Knee           float64 `json:"knee,omitempty"`
	KneeLo         float64 `json:"knee_lo,omitempty"`
	KneeHi         float64 `json:"knee_hi,omitempty"`
	KneeConfidence float64 `json:"knee_confidence,omitempty"`
	Passing        float64 `json:"passing,omitempty"`
	Failing        float64 `json:"failing,omitempty"`
	PassingHeld    int     `json:"passing_held,omitempty"`
	FailingBroke   int     `json:"failing_broke,omitempty"`
	// KneeRPS and KneeP99Us are the achieved RPS and the p99 (µs) at
	// Passing, medians of its repeats.
	KneeRPS   float64 `json:"knee_rps,omitempty"`
	KneeP99Us int64   `json:"knee_p99_us,omitempty"`
	// SaturatedAgents names the agents that were client-bound in an
	// inconclusive step; MoreAgents is how many more agents the search
	// estimates it needs to run it unsaturated.
	SaturatedAgents []string `json:"saturated_agents,omitempty"`
	MoreAgents      int      `json:"more_agents,omitempty"`
	// Steps are every step in the order run; the curve is Steps sorted by
	// target.
	Steps []SearchStep    `json:"steps"`
	Curve []SearchCurvePt `json:"curve"`
	// ElapsedS is the search's wall time, seconds.
	ElapsedS float64 `json:"elapsed_s"`
}

// SearchStep is one step: a run at Target (requests/s or connections),
// stored in the run store as RunID with the search's ID.
type SearchStep struct {
	Index  int     `json:"index"`
	Target float64 `json:"target"`
	// Repeat is 0 for a step's first run, 1.. for its repeats.
	Repeat      int     `json:"repeat"`
	RunID       string  `json:"run_id"`
	AchievedRPS float64 `json:"achieved_rps"`
	P50Us       int64   `json:"p50_us"`
	P99Us       int64   `json:"p99_us"`
	P999Us      int64   `json:"p999_us"`
	Errors      int64   `json:"errors"`
	// Verdict is "pass" (every SLO held), "fail" (one broke) or
	// "inconclusive" (client-bound, or the achieved rate more than 1 %
	// short of the target: never a pass); Why gives the failed SLOs or the
	// reasons.
	Verdict string `json:"verdict"`
	Why     string `json:"why,omitempty"`
}

// SearchCurvePt is one point of the throughput-latency curve.
type SearchCurvePt struct {
	Target      float64 `json:"target"`
	AchievedRPS float64 `json:"achieved_rps"`
	P99Us       int64   `json:"p99_us"`
	Verdict     string  `json:"verdict"`
}

// WriteSearchJSON writes s as indented JSON.
func WriteSearchJSON(w io.Writer, s *Search) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// PacingPhrases names how an open-loop schedule was paced when not each
// request at its own instant: "paced in 1ms windows" (--pacing-window),
// "paced with a spin" (--pacing-spin), both, or none.
func PacingPhrases(window time.Duration, spin bool) []string {
	var out []string
	if window > 0 {
		out = append(out, fmt.Sprintf("paced in %v windows", window))
	}
	if spin {
		out = append(out, "paced with a spin")
	}
	return out
}

// pacing is PacingPhrases of the steps, each after ", ".
func (s *Search) pacing() string {
	out := ""
	for _, ph := range PacingPhrases(time.Duration(s.PacingWindowUs)*time.Microsecond, s.PacingSpin) {
		out += ", " + ph
	}
	return out
}

// WriteSearchText writes s for a terminal: the answer first, then the
// table of steps and the curve (a bar per step, its length the achieved
// RPS, its p99 beside it).
func WriteSearchText(w io.Writer, s *Search) error {
	p := &printer{w: w}
	p.f("Capacity search %s of %s (%s loop, %s%s), SLO %s\n", s.SearchID, s.URL, s.Mode, s.Unit, s.pacing(), strings.Join(s.SLOs, " and "))
	switch s.Outcome {
	case "found":
		p.f("Knee: %s %s (%.0f %% CI %s .. %s): the SLOs held at %s in %d of %d runs and broke at %s in %d of %d\n",
			fmtLoad(s.Knee), s.Unit, 100*s.KneeConfidence, fmtLoad(s.KneeLo), fmtLoad(s.KneeHi),
			fmtLoad(s.Passing), s.PassingHeld, s.Repeats, fmtLoad(s.Failing), s.FailingBroke, s.Repeats)
		p.f("At %s (the bracket's passing step, medians of its runs): %.2f requests/s achieved, p99 %s\n", fmtLoad(s.Passing), s.KneeRPS, fmtUs(float64(s.KneeP99Us)))
	default:
		p.f("%s: %s\n", strings.ToUpper(strings.ReplaceAll(s.Outcome, "_", " ")), s.Message)
	}
	p.f("Steps (%d, %s):\n", len(s.Steps), fmtSeconds(s.ElapsedS))
	p.f("  %4s %12s %12s %10s %10s %10s %8s  %-12s %s\n", "STEP", "TARGET", "ACHIEVED", "P50", "P99", "P99.9", "ERRORS", "VERDICT", "RUN")
	for _, st := range s.Steps {
		v := st.Verdict
		if st.Repeat > 0 {
			v += fmt.Sprintf(" (r%d)", st.Repeat)
		}
		p.f("  %4d %12s %12.1f %10s %10s %10s %8d  %-12s %s\n", st.Index, fmtLoad(st.Target), st.AchievedRPS,
			fmtUs(float64(st.P50Us)), fmtUs(float64(st.P99Us)), fmtUs(float64(st.P999Us)), st.Errors, v, st.RunID)
		if st.Why != "" && st.Verdict != "pass" {
			p.f("       %s\n", st.Why)
		}
	}
	top := 0.0
	for _, c := range s.Curve {
		top = max(top, c.AchievedRPS)
	}
	p.f("Throughput-latency curve (achieved requests/s, p99):\n")
	for _, c := range s.Curve {
		n := 0
		if top > 0 {
			n = int(40 * c.AchievedRPS / top)
		}
		p.f("  %12s |%-40s %10.1f/s  p99 %s %s\n", fmtLoad(c.Target), strings.Repeat("#", n), c.AchievedRPS, fmtUs(float64(c.P99Us)), c.Verdict)
	}
	return p.err
}

// fmtLoad prints a rate or a connection count without a needless
// fraction.
func fmtLoad(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

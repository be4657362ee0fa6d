package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/phalanxload/phalanx/internal/report"
)

// Defaults of Config (coordctl search's flags).
const (
	DefaultRateFrom        = 1000
	DefaultRateTo          = 200000
	DefaultConnectionsFrom = 10
	DefaultConnectionsTo   = 4000
	DefaultPrecision       = 0.02
	DefaultRepeats         = 3
	DefaultMaxSteps        = 40
	// ShortfallLimit is how far the achieved rate may fall below an
	// open-loop step's target (a fraction) before the step is
	// inconclusive: the cluster did not offer the load it was asked to.
	ShortfallLimit = 0.01
	// Confidence is the confidence level asked of the knee's interval;
	// with fewer repeats than it needs (6 for 95 %) the interval is the
	// repeats' range, at the level it has (1 − 2·0.5^n: 75 % for 3).
	Confidence = 0.95
)

// SLO is one objective a step must hold, with the value a step measured
// against it read by the Runner. Below says the value must stay below
// Limit (latency, errors), else above it (rps).
type SLO struct {
	Text  string
	Limit float64
	Below bool
}

// Config configures a search. Zero fields take the defaults above.
type Config struct {
	// Closed searches the connections (closed loop); else the rate.
	Closed bool
	// From and To bound the searched load (requests/s or connections).
	From, To float64
	// Precision is the bisection's stopping width, a fraction of the
	// highest passing load.
	Precision float64
	// Repeats is how many times the two steps next to the boundary run
	// (the first run included).
	Repeats int
	// MaxSteps and MaxTime bound the search (0 MaxTime: none).
	MaxSteps int
	MaxTime  time.Duration
	// SLOs are the objectives (at least one).
	SLOs []SLO
	// Agents is the number of agents a step runs on, for the advice on
	// how many more an inconclusive search needs (0: unknown).
	Agents int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Outcome is what one step measured, as the Runner read it from its run's
// report.
type Outcome struct {
	RunID       string
	AchievedRPS float64
	P50Us       int64
	P99Us       int64
	P999Us      int64
	Errors      int64
	// SLOValues has one value per Config.SLOs, in order; SLOPass whether
	// it held (NaN value and false: no data).
	SLOValues []float64
	SLOPass   []bool
	// ClientBound and its reasons as the report gave them (report.Report:
	// ClientBound, ClientBoundReasons); Agents the busy fraction (CPU use
	// plus run-queue wait) of each agent, by name.
	ClientBound        bool
	ClientBoundReasons []string
	// ServerBound and its reasons as the report gave them: a shortfall
	// of a server-bound step is the server's, a failure.
	ServerBound        bool
	ServerBoundReasons []string
	AgentDemand        map[string]float64
	// AgentClientLate is each agent's open-loop sends late by its own
	// delay (report's agent rows, Agent.ClientLate; never a wait for a busy
	// connection), to name the agents behind a run-level reason.
	AgentClientLate map[string]int64
}

// Runner runs one step at load target (requests/s or connections; repeat
// 0 for the first run at it) and returns what it measured. An error ends
// the search (what ran is kept); ctx's end stops the step.
type Runner func(ctx context.Context, target float64, repeat int) (Outcome, error)

// step is one run with its verdict.
type step struct {
	target  float64
	repeat  int
	out     Outcome
	verdict string
	why     string
}

// Run searches with cfg, running steps with run, and returns the result
// (never nil when err is nil; with ctx's end, what was found so far with
// Outcome "stopped"). Errors: a bad cfg, or a Runner error (then the
// result so far is returned with it).
func Run(ctx context.Context, cfg Config, run Runner) (*report.Search, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &searcher{cfg: cfg, run: run, start: cfg.Now()}
	err := s.search(ctx)
	res := s.result()
	if errors.Is(err, errStop) || (err != nil && ctx.Err() != nil) {
		err = nil
	}
	return res, err
}

var errStop = errors.New("search stopped")

func (c *Config) fill() error {
	if c.From == 0 && c.To == 0 {
		c.From, c.To = DefaultRateFrom, DefaultRateTo
		if c.Closed {
			c.From, c.To = DefaultConnectionsFrom, DefaultConnectionsTo
		}
	}
	if c.From <= 0 || c.To < c.From {
		return fmt.Errorf("search: range %v..%v: want 0 < from <= to", c.From, c.To)
	}
	if c.Precision == 0 {
		c.Precision = DefaultPrecision
	}
	if c.Precision <= 0 || c.Precision >= 1 {
		return fmt.Errorf("search: precision %v: want between 0 and 1 (0.02 is 2 %%)", c.Precision)
	}
	if c.Repeats == 0 {
		c.Repeats = DefaultRepeats
	}
	if c.Repeats < 1 {
		return fmt.Errorf("search: repeats %d: want at least 1", c.Repeats)
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxSteps < 1 {
		return fmt.Errorf("search: max steps %d: want at least 1", c.MaxSteps)
	}
	if len(c.SLOs) == 0 {
		return errors.New("search: no SLO: give at least one (--slo 'p99<3ms')")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

type searcher struct {
	cfg   Config
	run   Runner
	start time.Time
	steps []step
	// lo is the highest load that passed, hi the lowest that failed (0:
	// none yet).
	lo, hi float64
	// outcome and message once decided.
	outcome, message string
	saturated        []string
	more             int
}

// search runs the steps: growth, bisection, repeats.
func (s *searcher) search(ctx context.Context) error {
	x := s.cfg.From
	for { // exponential growth
		st, err := s.step(ctx, x, 0)
		if err != nil {
			return err
		}
		if st.verdict == "inconclusive" {
			return s.inconclusive(st)
		}
		if st.verdict == "fail" {
			s.hi = x
			break
		}
		s.lo = x
		if x >= s.cfg.To {
			s.outcome = "above_range"
			s.message = fmt.Sprintf("every SLO held up to the range's top, %s %s: raise the range's top to find the knee", fmtLoad(s.cfg.To), s.unit())
			return nil
		}
		x = min(2*x, s.cfg.To)
	}
	if s.lo == 0 {
		s.outcome = "below_range"
		s.message = fmt.Sprintf("the first step, %s %s, broke the SLO: lower the range's start", fmtLoad(s.cfg.From), s.unit())
		return nil
	}
	for !s.narrow() { // bisection
		mid := s.round((s.lo + s.hi) / 2)
		st, err := s.step(ctx, mid, 0)
		if err != nil {
			return err
		}
		switch st.verdict {
		case "inconclusive":
			return s.inconclusive(st)
		case "pass":
			s.lo = mid
		default:
			s.hi = mid
		}
	}
	for r := 1; r < s.cfg.Repeats; r++ { // the boundary's repeats
		for _, x := range []float64{s.lo, s.hi} {
			st, err := s.step(ctx, x, r)
			if err != nil {
				return err
			}
			if st.verdict == "inconclusive" {
				return s.inconclusive(st)
			}
		}
	}
	s.outcome = "found"
	return nil
}

// narrow reports whether the bracket is within the precision (or, for
// connections, one apart).
func (s *searcher) narrow() bool {
	if s.cfg.Closed && s.hi-s.lo <= 1 {
		return true
	}
	return (s.hi-s.lo)/s.lo <= s.cfg.Precision
}

// round rounds a connection count to a whole number.
func (s *searcher) round(x float64) float64 {
	if s.cfg.Closed {
		return math.Round(x)
	}
	return math.Round(x*10) / 10
}

func (s *searcher) unit() string {
	if s.cfg.Closed {
		return "connections"
	}
	return "requests/s"
}

// step runs one step, after checking the bounds, and judges it.
func (s *searcher) step(ctx context.Context, x float64, repeat int) (*step, error) {
	if ctx.Err() != nil {
		s.stopped("stopped (Ctrl-C)")
		return nil, errStop
	}
	if len(s.steps) >= s.cfg.MaxSteps {
		s.stopped(fmt.Sprintf("--max-steps %d reached", s.cfg.MaxSteps))
		return nil, errStop
	}
	if s.cfg.MaxTime > 0 && s.cfg.Now().Sub(s.start) >= s.cfg.MaxTime {
		s.stopped(fmt.Sprintf("--max-time %s reached", s.cfg.MaxTime))
		return nil, errStop
	}
	out, err := s.run(ctx, x, repeat)
	if err != nil {
		if ctx.Err() != nil {
			s.stopped("stopped (Ctrl-C) during a step")
			return nil, errStop
		}
		s.stopped(fmt.Sprintf("step at %s %s: %v", fmtLoad(x), s.unit(), err))
		return nil, fmt.Errorf("step at %s %s: %w", fmtLoad(x), s.unit(), err)
	}
	st := step{target: x, repeat: repeat, out: out}
	st.verdict, st.why = s.judge(x, &out)
	s.steps = append(s.steps, st)
	return &s.steps[len(s.steps)-1], nil
}

// judge gives a step's verdict: inconclusive when client-bound or (open
// loop) short of its target by more than ShortfallLimit, whatever the
// SLOs said; else fail when an SLO broke, pass when all held.
func (s *searcher) judge(x float64, o *Outcome) (verdict, why string) {
	if o.ClientBound {
		return "inconclusive", "client-bound: " + strings.Join(o.ClientBoundReasons, "; ")
	}
	var failed []string
	for i, slo := range s.cfg.SLOs {
		if i >= len(o.SLOPass) || !o.SLOPass[i] {
			failed = append(failed, slo.Text)
		}
	}
	if short := !s.cfg.Closed && o.AchievedRPS < (1-ShortfallLimit)*x; short && len(failed) == 0 {
		why := fmt.Sprintf("achieved %.1f requests/s, %.1f %% short of the target", o.AchievedRPS, 100*(1-o.AchievedRPS/x))
		if o.ServerBound {
			// The server held every connection: it did not keep up.
			return "fail", why + "; server-bound: " + strings.Join(o.ServerBoundReasons, "; ")
		}
		// Short with every SLO held and the server not the limit: the
		// cluster did not offer the load.
		return "inconclusive", why
	}
	if len(failed) > 0 {
		return "fail", "broke " + strings.Join(failed, ", ")
	}
	return "pass", ""
}

// inconclusive ends the search at an inconclusive step: it names the
// saturated agents and estimates how many more would run it.
func (s *searcher) inconclusive(st *step) error {
	s.outcome = "inconclusive"
	demand := 0.0
	for name, d := range st.out.AgentDemand {
		if d > report.ClientBusyLimit || slices.ContainsFunc(st.out.ClientBoundReasons, func(r string) bool { return strings.Contains(r, "agent "+name+"'") }) {
			s.saturated = append(s.saturated, name)
		}
		demand = max(demand, d)
	}
	if len(s.saturated) == 0 && st.out.ClientBound {
		// A run-level reason (late sends, lateness): the agents that sent
		// late, else every agent.
		for name, n := range st.out.AgentClientLate {
			if n > 0 {
				s.saturated = append(s.saturated, name)
			}
		}
		if len(s.saturated) == 0 {
			for name := range st.out.AgentDemand {
				s.saturated = append(s.saturated, name)
			}
		}
	}
	sort.Strings(s.saturated)
	if !st.out.ClientBound && st.out.AchievedRPS > 0 {
		demand = max(demand, st.target/st.out.AchievedRPS*report.ClientBusyLimit)
	}
	n := s.cfg.Agents
	if n == 0 {
		n = len(st.out.AgentDemand)
	}
	if n > 0 && demand > 0 {
		// Enough agents that each would be at most 70 % busy at this step.
		s.more = max(1, int(math.Ceil(float64(n)*demand/0.7))-n)
	}
	msg := fmt.Sprintf("the step at %s %s was inconclusive (%s): the cluster is too small for the answer", fmtLoad(st.target), s.unit(), st.why)
	if len(s.saturated) > 0 {
		msg += "; saturated: " + strings.Join(s.saturated, ", ")
	}
	if s.more > 0 {
		agents := "agents"
		if s.more == 1 {
			agents = "agent"
		}
		msg += fmt.Sprintf("; add at least %d %s (%d → %d) or give them more CPUs", s.more, agents, n, n+s.more)
	}
	if s.lo > 0 {
		msg += fmt.Sprintf("; every SLO held up to %s %s", fmtLoad(s.lo), s.unit())
	}
	s.message = msg
	return nil
}

func (s *searcher) stopped(why string) {
	s.outcome = "stopped"
	s.message = why
	switch {
	case s.lo > 0 && s.hi > 0:
		s.message += fmt.Sprintf(": so far the knee is between %s and %s %s", fmtLoad(s.lo), fmtLoad(s.hi), s.unit())
	case s.lo > 0:
		s.message += fmt.Sprintf(": so far every SLO held up to %s %s", fmtLoad(s.lo), s.unit())
	}
}

// result builds the report model.
func (s *searcher) result() *report.Search {
	r := &report.Search{
		Mode: "open", Unit: s.unit(), RangeFrom: s.cfg.From, RangeTo: s.cfg.To,
		Precision: s.cfg.Precision, Repeats: s.cfg.Repeats, Outcome: s.outcome, Message: s.message,
		SaturatedAgents: s.saturated, MoreAgents: s.more, ElapsedS: s.cfg.Now().Sub(s.start).Seconds(),
		Steps: []report.SearchStep{}, Curve: []report.SearchCurvePt{},
	}
	if s.cfg.Closed {
		r.Mode = "closed"
	}
	for _, slo := range s.cfg.SLOs {
		r.SLOs = append(r.SLOs, slo.Text)
	}
	for i, st := range s.steps {
		r.Steps = append(r.Steps, report.SearchStep{
			Index: i + 1, Target: st.target, Repeat: st.repeat, RunID: st.out.RunID, AchievedRPS: st.out.AchievedRPS,
			P50Us: st.out.P50Us, P99Us: st.out.P99Us, P999Us: st.out.P999Us, Errors: st.out.Errors,
			Verdict: st.verdict, Why: st.why,
		})
		r.Curve = append(r.Curve, report.SearchCurvePt{Target: st.target, AchievedRPS: st.out.AchievedRPS, P99Us: st.out.P99Us, Verdict: st.verdict})
	}
	sort.SliceStable(r.Curve, func(i, j int) bool { return r.Curve[i].Target < r.Curve[j].Target })
	if s.outcome == "found" {
		s.knee(r)
	}
	return r
}

// knee estimates the knee from the boundary's repeats: for repeat k, the
// load where the SLO margin (value over limit, for the SLO that broke at
// the failing step) crosses 1, interpolated linearly between the passing
// and the failing step's k-th runs; the knee is their median with its
// confidence interval (benchmath, no assumption about the distribution),
// widened to hold the bracket [passing, failing] the search resolved.
func (s *searcher) knee(r *report.Search) {
	r.Passing, r.Failing = s.lo, s.hi
	var at, above []*step
	for i := range s.steps {
		switch s.steps[i].target {
		case s.lo:
			at = append(at, &s.steps[i])
		case s.hi:
			above = append(above, &s.steps[i])
		}
	}
	var est, rps, p99 []float64
	for k := range min(len(at), len(above)) {
		est = append(est, s.cross(at[k], above[k]))
	}
	for _, st := range at {
		rps = append(rps, st.out.AchievedRPS)
		p99 = append(p99, float64(st.out.P99Us))
		if st.verdict == "pass" {
			r.PassingHeld++
		}
	}
	for _, st := range above {
		if st.verdict == "fail" {
			r.FailingBroke++
		}
	}
	conf := min(Confidence, 1-2*math.Pow(0.5, float64(len(est))))
	if len(est) == 0 {
		r.Knee, r.KneeLo, r.KneeHi = s.lo, s.lo, s.hi
		return
	}
	sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(est, &benchmath.DefaultThresholds), conf)
	r.Knee, r.KneeConfidence = sum.Center, sum.Confidence
	r.KneeLo, r.KneeHi = sum.Lo, sum.Hi
	if math.IsInf(r.KneeLo, 0) || math.IsInf(r.KneeHi, 0) || len(est) == 1 {
		r.KneeLo, r.KneeHi, r.KneeConfidence = slices.Min(est), slices.Max(est), 0
	}
	r.KneeLo, r.KneeHi = min(r.KneeLo, s.lo), max(r.KneeHi, s.hi)
	r.KneeRPS = median(rps)
	r.KneeP99Us = int64(median(p99))
}

// cross interpolates where the tightest SLO's margin reaches 1 between a
// passing run a and a failing run b (clamped to half the bracket below
// a and above b).
func (s *searcher) cross(a, b *step) float64 {
	best := math.NaN()
	for i, slo := range s.cfg.SLOs {
		ma, mb := margin(slo, a.out.SLOValues, i), margin(slo, b.out.SLOValues, i)
		if math.IsNaN(ma) || math.IsNaN(mb) || mb <= ma {
			continue
		}
		x := a.target + (1-ma)/(mb-ma)*(b.target-a.target)
		if math.IsNaN(best) || x < best {
			best = x
		}
	}
	if math.IsNaN(best) {
		return (a.target + b.target) / 2
	}
	w := b.target - a.target
	return math.Max(a.target-w/2, math.Min(b.target+w/2, best))
}

// margin is value over limit for a Below SLO, limit over value for an
// above one: under 1 holds. NaN without a value.
func margin(slo SLO, vals []float64, i int) float64 {
	if i >= len(vals) || math.IsNaN(vals[i]) {
		return math.NaN()
	}
	v := vals[i]
	if slo.Below {
		if slo.Limit == 0 {
			if v > 0 {
				return 2
			}
			return 0
		}
		return v / slo.Limit
	}
	if v == 0 {
		return math.Inf(1)
	}
	return slo.Limit / v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func fmtLoad(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

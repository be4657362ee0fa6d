package threshold

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
)

// Metric is what a threshold measures.
type Metric uint8

// The metrics of a threshold.
const (
	// Percentile is pNN of a latency histogram (Threshold.Percentile).
	Percentile Metric = iota
	// Max and Mean of a latency histogram.
	Max
	Mean
	// RPS is completed responses per second of the window (with Kind
	// hist.OK, ok.rps: those of status 200-399 only).
	RPS
	// Errors is the requests that ended in an error kind (connect, tls,
	// timeout, reset, ...: no response), exactly what the report's
	// "Errors:" line, ERRORS columns and JSON errors count. With
	// Threshold.Rate it is their share of the ended requests (responses +
	// errors), else their count.
	Errors
	// Failed is Errors plus the responses outside 200-399 (the report's
	// "Non-2xx or 3xx responses"), as k6's http_req_failed counts
	// failures with its default expected statuses; a share or a count as
	// Errors.
	Failed
)

// Op is a threshold's comparison.
type Op uint8

// The comparisons, as written.
const (
	Less Op = iota
	LessEq
	Greater
	GreaterEq
)

var opText = [...]string{"<", "<=", ">", ">="}

// Units of Result.Unit.
const (
	UnitMicros = "us"
	UnitRatio  = "ratio"
	UnitCount  = "count"
	UnitRPS    = "rps"
)

// Threshold is one parsed criterion. The grammar (k6's, with Phalanx's
// metric names):
//
//	[stageN.][PHASE.]METRIC OP VALUE
//	METRIC: p50 p90 p99 p99.9 p99.99 (any pNN.NN from p0 to p100), max, mean,
//	        rps, errors, failed; and k6's spellings (k6 docs, Thresholds):
//	        p(95) p(99.9) for pNN, avg for mean, med for p50, and rate for
//	        failed as a 0-1 ratio (k6's http_req_failed rate)
//	PHASE:  latency (the default), service, connect, tls_full, tls_resumed,
//	        ttfb, lateness, ok, handshake_latency (hist.Kind's names)
//	OP:     < <= > >=
//	VALUE:  a duration for latencies (3ms, 250us, 1.5s; Go's units, µs too;
//	        with k6's spellings a bare number is milliseconds, as k6's
//	        http_req_duration), a number for rps, a percentage (0.1%) or a
//	        count for errors and failed, a ratio (0.01) or a percentage for
//	        rate
//
// errors counts what the report's Errors line counts (requests that got
// no response: every error kind); failed adds the responses outside
// 200-399, as k6's http_req_failed does.
//
// stageN scopes it to plan stage N, numbered as the report's Stage column
// and the JSON stages[].index; a stage keeps only its latency, rps and
// errors. A phase applies to latency metrics only, except ok: ok.p99 is the
// latency of the responses of status 200-399 alone (hist.OK) and ok.rps
// their rate, where p99 and rps count every completed response (a server
// answering fast 429s under overload improves those as it fails).
type Threshold struct {
	// Text is the threshold as written, spaces removed.
	Text string
	// Stage is the stage it is scoped to; -1 for the whole window.
	Stage int
	// Kind is the histogram a latency metric reads (hist.Latency unless a
	// phase is named).
	Kind   hist.Kind
	Metric Metric
	// Percentile is the percentile (0-100) of a Percentile metric.
	Percentile float64
	Op         Op
	// Limit is the bound, in the metric's unit: µs for latencies, a 0-1
	// ratio for an error rate, a count, or requests/s.
	Limit float64
	// Rate marks an Errors or Failed threshold given as a share (a
	// percentage, or k6's rate).
	Rate bool
}

// String returns the threshold as written (spaces removed).
func (t Threshold) String() string { return t.Text }

// Unit returns the unit of the metric's value: UnitMicros, UnitRatio,
// UnitCount or UnitRPS.
func (t Threshold) Unit() string {
	switch {
	case t.Metric == RPS:
		return UnitRPS
	case (t.Metric == Errors || t.Metric == Failed) && t.Rate:
		return UnitRatio
	case t.Metric == Errors || t.Metric == Failed:
		return UnitCount
	}
	return UnitMicros
}

// Parse parses one threshold. Errors name the threshold and what is wrong
// with it, listing the allowed metrics, phases or operators.
func Parse(s string) (Threshold, error) {
	text := strings.Join(strings.Fields(s), "")
	t := Threshold{Text: text, Stage: -1, Kind: hist.Latency}
	fail := func(format string, args ...any) (Threshold, error) {
		return Threshold{}, fmt.Errorf("threshold %q: %s", s, fmt.Sprintf(format, args...))
	}
	i := strings.IndexAny(text, "<>")
	if i <= 0 {
		return fail("want METRIC OP VALUE with OP one of < <= > >=, e.g. p99<3ms, errors<0.1%%, rps>1000")
	}
	lhs, rest := text[:i], text[i:]
	switch {
	case strings.HasPrefix(rest, "<="):
		t.Op, rest = LessEq, rest[2:]
	case strings.HasPrefix(rest, ">="):
		t.Op, rest = GreaterEq, rest[2:]
	case rest[0] == '<':
		t.Op, rest = Less, rest[1:]
	default:
		t.Op, rest = Greater, rest[1:]
	}
	if rest == "" {
		return fail("no value after %s", opText[t.Op])
	}
	lhs, k6 := k6Percentile(strings.ToLower(lhs))
	if !k6 && strings.Contains(lhs, "p(") {
		return fail("percentile %q: want p(N) with N from 0 to 100, e.g. p(95), p(99.9)", lhs[strings.Index(lhs, "p("):])
	}
	parts := strings.Split(lhs, ".")
	// A percentile has a dot of its own (p99.9): join it back.
	if n := len(parts); n >= 2 && isPercentileHead(parts[n-2]) && isDigits(parts[n-1]) {
		parts = append(parts[:n-2], parts[n-2]+"."+parts[n-1])
	}
	if len(parts) > 0 && strings.HasPrefix(parts[0], "stage") && len(parts) > 1 {
		n, err := strconv.Atoi(strings.TrimPrefix(parts[0], "stage"))
		if err != nil || n < 0 {
			return fail("%q: want stageN with N a stage index (0, 1, ...) as the report numbers them", parts[0])
		}
		t.Stage, parts = n, parts[1:]
	}
	phase := ""
	if len(parts) == 2 {
		phase, parts = parts[0], parts[1:]
		k, ok := kindByName(phase)
		if !ok {
			return fail("unknown phase %q: want one of %s", phase, strings.Join(kindNames(), ", "))
		}
		t.Kind = k
	}
	if len(parts) != 1 {
		return fail("want [stageN.][PHASE.]METRIC, e.g. tls_full.p99 or stage1.p99")
	}
	metric := parts[0]
	switch {
	case metric == "max":
		t.Metric = Max
	case metric == "mean":
		t.Metric = Mean
	case metric == "avg": // k6's
		t.Metric, k6 = Mean, true
	case metric == "med": // k6's
		t.Metric, t.Percentile, k6 = Percentile, 50, true
	case metric == "rps":
		t.Metric = RPS
	case metric == "errors":
		t.Metric = Errors
	case metric == "failed":
		t.Metric = Failed
	case metric == "rate": // k6's http_req_failed rate
		t.Metric, t.Rate = Failed, true
	case strings.HasPrefix(metric, "p"):
		q, err := strconv.ParseFloat(metric[1:], 64)
		if err != nil || q < 0 || q > 100 {
			return fail("percentile %q: want p0 to p100, e.g. p50, p99, p99.9", metric)
		}
		t.Metric, t.Percentile = Percentile, q
	default:
		return fail("unknown metric %q: want pNN (p50, p99, p99.9 ...) or p(N), max, mean or avg, med, rps, errors, failed or rate", metric)
	}
	if phase != "" && (t.Metric == Errors || t.Metric == Failed || (t.Metric == RPS && t.Kind != hist.OK)) {
		return fail("%s has no phase: %s.%s is not a metric", metric, phase, metric)
	}
	if t.Stage >= 0 && t.Kind != hist.Latency {
		return fail("a stage keeps only its latency, rps and errors, not %s", phase)
	}
	switch t.Metric {
	case RPS:
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) {
			return fail("rps value %q: want a number of requests/s, e.g. 1000", rest)
		}
		t.Limit = v
	case Errors, Failed:
		if num, ok := strings.CutSuffix(rest, "%"); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v < 0 || v > 100 {
				return fail("%s rate %q: want a percentage from 0%% to 100%%, e.g. 0.1%%", metric, rest)
			}
			t.Limit, t.Rate = v/100, true
		} else if t.Rate { // k6's rate: a ratio
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil || v < 0 || v > 1 {
				return fail("rate value %q: want a ratio from 0 to 1 (k6's http_req_failed rate), e.g. 0.01, or a percentage", rest)
			}
			t.Limit = v
		} else {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil || v < 0 || math.IsInf(v, 0) {
				return fail("%s value %q: want a percentage (0.1%%) or a count (10)", metric, rest)
			}
			t.Limit = v
		}
	default:
		if v, err := strconv.ParseFloat(rest, 64); err == nil && k6 && v >= 0 && !math.IsInf(v, 0) {
			t.Limit = v * 1000 // k6's bare number: milliseconds
			break
		}
		d, err := time.ParseDuration(strings.ReplaceAll(rest, "µs", "us"))
		if err != nil || d < 0 {
			return fail("%s value %q: want a duration, e.g. 3ms, 250us, 1.5s", metric, rest)
		}
		t.Limit = float64(d) / float64(time.Microsecond)
	}
	return t, nil
}

// k6Percentile rewrites k6's percentile spelling in lhs, p(95) or
// p(99.9), as Phalanx's (p95, p99.9), reporting whether it did; a
// malformed one is left for the metric's error.
func k6Percentile(lhs string) (string, bool) {
	i := strings.Index(lhs, "p(")
	if i < 0 || (i > 0 && lhs[i-1] != '.') || !strings.HasSuffix(lhs, ")") {
		return lhs, false
	}
	n := lhs[i+2 : len(lhs)-1]
	if _, err := strconv.ParseFloat(n, 64); err != nil || strings.ContainsAny(n, "eE+-") {
		return lhs, false
	}
	return lhs[:i] + "p" + n, true
}

// ParseAll parses every threshold of ss; the error joins one error per bad
// threshold.
func ParseAll(ss []string) ([]Threshold, error) {
	out := make([]Threshold, 0, len(ss))
	var errs []string
	for _, s := range ss {
		t, err := Parse(s)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, t)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

func isPercentileHead(s string) bool { return len(s) >= 2 && s[0] == 'p' && isDigits(s[1:]) }

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func kindByName(name string) (hist.Kind, bool) {
	for k := range hist.NumKinds {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func kindNames() []string {
	out := make([]string, 0, hist.NumKinds)
	for k := range hist.NumKinds {
		out = append(out, k.String())
	}
	return out
}

// CheckStages refuses the thresholds scoped to a stage the plan does not
// have (stages: the plan's stage count, stage0 to stage{stages-1}), before
// any load runs: such a threshold could only fail, with no samples. The
// error names each one and the stages there are.
func CheckStages(ts []Threshold, stages int) error {
	var errs []string
	for _, t := range ts {
		if t.Stage < stages {
			continue
		}
		switch stages {
		case 0:
			errs = append(errs, fmt.Sprintf("%q: the plan has no stages (stageN scopes a threshold to a plan stage)", t.Text))
		case 1:
			errs = append(errs, fmt.Sprintf("%q: the plan has 1 stage, stage0", t.Text))
		default:
			errs = append(errs, fmt.Sprintf("%q: the plan has %d stages, stage0 to stage%d (numbered from 0, as the report's Stage column)", t.Text, stages, stages-1))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

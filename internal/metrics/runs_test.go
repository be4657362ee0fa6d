package metrics

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

// gather collects c's metric families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// label returns m's value of label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestRunsKeep: only the last Keep runs keep their series, ended runs
// dropping first; a run in progress is never dropped.
func TestRunsKeep(t *testing.T) {
	rs := NewRuns(2)
	r1 := rs.Start(RunLabels{ID: "r1"}, nil)
	r1.End()
	rs.Start(RunLabels{ID: "r2"}, nil) // in progress
	r3 := rs.Start(RunLabels{ID: "r3"}, nil)
	r3.End()
	rs.Start(RunLabels{ID: "r4"}, nil)
	var ids []string
	for _, m := range gather(t, rs)["phalanx_run_requests_total"].GetMetric() {
		ids = append(ids, label(m, "run_id"))
	}
	slices.Sort(ids)
	if want := []string{"r2", "r4"}; !slices.Equal(ids, want) {
		t.Errorf("runs with series %v, want %v", ids, want)
	}
}

// TestRunIntervals: a run's series sum its intervals' counters and
// latency samples, keep the last interval's gauges, and count losses.
func TestRunIntervals(t *testing.T) {
	rs := NewRuns(0)
	if rs.Keep != DefaultKeep {
		t.Errorf("NewRuns(0).Keep = %d, want %d", rs.Keep, DefaultKeep)
	}
	r := rs.Start(RunLabels{ID: "run"}, []string{"a1", "a2"})
	h := hist.New()
	for i := range 10 {
		h.RecordMicros(int64(100 * (i + 1)))
	}
	lat, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Interval(Interval{Latency: []byte("junk")}); err == nil {
		t.Error("a corrupt latency histogram: no error")
	}
	for i := range 3 {
		var c measure.Counts
		c.Requests, c.Status[200], c.Status[503] = 10, 9, 1
		c.Errors[measure.ErrTimeout], c.BytesRead = int64(i), 1000
		if err := r.Interval(Interval{Length: time.Second / 2, Counts: &c, Latency: lat, TargetRPS: float64(100 * (i + 1)), CPUBusy: []float64{0.5, float64(i) / 10}, Agents: 2}); err != nil {
			t.Fatal(err)
		}
	}
	r.Lost()
	fams := gather(t, rs)
	one := func(name string, labels ...string) float64 {
		t.Helper()
		for _, m := range fams[name].GetMetric() {
			ok := true
			for i := 0; i+1 < len(labels); i += 2 {
				ok = ok && label(m, labels[i]) == labels[i+1]
			}
			if ok {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		t.Errorf("no %s%v", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"phalanx_run_requests_total", nil, 30},
		{"phalanx_run_responses_total", []string{"code", "200"}, 27},
		{"phalanx_run_responses_total", []string{"code", "503"}, 3},
		{"phalanx_run_errors_total", []string{"kind", "timeout"}, 3},
		{"phalanx_run_errors_total", []string{"kind", "connect"}, 0},
		{"phalanx_run_read_bytes_total", nil, 3000},
		{"phalanx_run_achieved_rps", nil, 20},
		{"phalanx_run_target_rps", nil, 300},
		{"phalanx_run_agents_running", nil, 1},
		{"phalanx_run_agents_lost", nil, 1},
		{"phalanx_run_agent_cpu_busy_ratio", []string{"agent", "a2"}, 0.2},
		{"phalanx_run_running", nil, 1},
	} {
		if got := one(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := fams["phalanx_run_latency_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 30 {
		t.Errorf("latency count %d, want 30", got)
	}
	r.End()
	if got := gather(t, rs)["phalanx_run_running"].GetMetric()[0].GetGauge().GetValue(); got != 0 {
		t.Errorf("phalanx_run_running after End = %v, want 0", got)
	}
	var none *Run // a daemon without metrics
	if err := none.Interval(Interval{Latency: []byte("junk")}); err != nil {
		t.Error(err)
	}
	none.Lost()
	none.End()
}

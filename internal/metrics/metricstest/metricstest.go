// Package metricstest scrapes a daemon's /metrics in tests, as Prometheus
// does (its text parser, or its protobuf decoder for native histograms),
// and reads series from the result.
package metricstest

import (
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs http://addr/metrics and parses it with Prometheus's text
// parser (protobuf: false) or, asking for the delimited protobuf format
// as a Prometheus with native histograms does, with its protobuf decoder.
func Scrape(t testing.TB, addr string, protobuf bool) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	if protobuf {
		format = expfmt.NewFormat(expfmt.TypeProtoDelim)
		req.Header.Set("Accept", string(format))
	}
	// No keep-alive: no idle connection's goroutines outlive the test
	// (goleak).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s/metrics: %s: %s", addr, resp.Status, b)
	}
	if !protobuf {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parse %s/metrics: %v", addr, err)
		}
		return fams
	}
	if got := expfmt.ResponseFormat(resp.Header); got.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("GET %s/metrics asking for protobuf: served %s", addr, got)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(resp.Body, format)
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			return fams
		} else if err != nil {
			t.Fatalf("decode %s/metrics: %v", addr, err)
		}
		fams[mf.GetName()] = &mf
	}
}

// Series returns the metric of family name whose labels include want
// (label name, value pairs), nil when there is none.
func Series(fams map[string]*dto.MetricFamily, name string, want ...string) *dto.Metric {
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && labels[want[i]] == want[i+1]
		}
		if ok {
			return m
		}
	}
	return nil
}

// Value is a counter's or gauge's value (-1 when the series is missing).
func Value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := Series(fams, name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

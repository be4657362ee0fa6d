package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRetarget(t *testing.T) {
	p := Plan{URL: "https://target.example/", Mix: []Request{
		{Method: "GET", URL: "https://target.example/index1.html?x=1"},
		{Method: "POST", URL: "https://target.example:443/api"},
	}}
	if err := p.Retarget("http://127.0.0.1:8080/base"); err != nil {
		t.Fatal(err)
	}
	if p.URL != "http://127.0.0.1:8080/base" {
		t.Errorf("Retarget: URL = %q, want http://127.0.0.1:8080/base", p.URL)
	}
	want := []string{"http://127.0.0.1:8080/index1.html?x=1", "http://127.0.0.1:8080/api"}
	for i, r := range p.Mix {
		if r.URL != want[i] {
			t.Errorf("Retarget: mix[%d].url = %q, want %q", i, r.URL, want[i])
		}
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Errorf("retargeted plan: %v", err)
	}
	for _, bad := range []string{"ftp://x/", "127.0.0.1:8443", ""} {
		q := Plan{URL: "https://target.example/"}
		if err := q.Retarget(bad); err == nil || q.URL != "https://target.example/" {
			t.Errorf("Retarget(%q) = %v, URL %q; want an error and the URL unchanged", bad, err, q.URL)
		}
	}
}

func TestCutStages(t *testing.T) {
	closed := func() Plan {
		return Plan{URL: "https://127.0.0.1/", Connections: 10, Interval: time.Second,
			Stages: []Stage{{Duration: 10 * time.Second, Connections: 110}, {Duration: 20 * time.Second, Connections: 110}, {Duration: 10 * time.Second, Connections: 0}}}
	}
	open := Plan{URL: "https://127.0.0.1/", Connections: 10, Interval: time.Second, Load: OpenLoop, Rate: 100,
		Stages: []Stage{{Duration: 4 * time.Second, Rate: 500}, {Duration: 4 * time.Second, Rate: 500}}}
	for _, tc := range []struct {
		name string
		p    Plan
		d    time.Duration
		want []Stage
	}{
		{"mid-ramp", closed(), 5 * time.Second, []Stage{{Duration: 5 * time.Second, Connections: 60}}},
		{"at a boundary", closed(), 30 * time.Second, closed().Stages[:2]},
		{"inside the hold", closed(), 12 * time.Second, []Stage{{Duration: 10 * time.Second, Connections: 110}, {Duration: 2 * time.Second, Connections: 110}}},
		{"whole", closed(), 40 * time.Second, closed().Stages},
		{"open loop", open, 3 * time.Second, []Stage{{Duration: 3 * time.Second, Rate: 400}}},
	} {
		p := tc.p
		kept, err := p.CutStages(tc.d)
		if err != nil {
			t.Fatalf("%s: CutStages(%v): %v", tc.name, tc.d, err)
		}
		if !reflect.DeepEqual(p.Stages, tc.want) || kept != len(tc.want) || p.Duration != tc.d {
			t.Errorf("%s: CutStages(%v) = %d, stages %v, duration %v; want %d, %v, %v", tc.name, tc.d, kept, p.Stages, p.Duration, len(tc.want), tc.want, tc.d)
		}
		// The cut plan's first d ramp exactly as the whole plan's did.
		for at := time.Duration(0); at <= tc.d; at += 500 * time.Millisecond {
			if got, want := p.TargetAt(at), tc.p.TargetAt(at); got != want {
				t.Errorf("%s: cut TargetAt(%v) = %v, whole plan %v", tc.name, at, got, want)
			}
		}
		p.SetDefaults()
		if err := p.Validate(); err != nil {
			t.Errorf("%s: cut plan: %v", tc.name, err)
		}
	}
	for _, d := range []time.Duration{41 * time.Second, 0, 1500 * time.Millisecond} {
		p := closed()
		_, err := p.CutStages(d)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "duration" || len(p.Stages) != 3 {
			t.Errorf("CutStages(%v) = %v, %d stages; want a duration FieldError and the stages unchanged", d, err, len(p.Stages))
		}
	}
	long := closed()
	if _, err := long.CutStages(41 * time.Second); err == nil || !strings.Contains(err.Error(), "stages' total (40s)") {
		t.Errorf("CutStages(41s) error %v; want it to give the stages' total", err)
	}
}

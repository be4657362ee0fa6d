package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStageSpans: spans tile the window from 0 and each ramps from the
// previous target (the first from Rate or Connections, by load model).
func TestStageSpans(t *testing.T) {
	open := Plan{Load: OpenLoop, Rate: 100, Stages: []Stage{{Duration: 10 * time.Second, Rate: 300}, {Duration: 5 * time.Second, Rate: 0}}}
	want := []StageSpan{{0, 10 * time.Second, 100, 300}, {10 * time.Second, 15 * time.Second, 300, 0}}
	if got := open.StageSpans(); !reflect.DeepEqual(got, want) {
		t.Errorf("open StageSpans() = %v, want %v", got, want)
	}
	closed := Plan{Connections: 4, Stages: []Stage{{Duration: time.Second, Connections: 8}}}
	want = []StageSpan{{0, time.Second, 4, 8}}
	if got := closed.StageSpans(); !reflect.DeepEqual(got, want) {
		t.Errorf("closed StageSpans() = %v, want %v", got, want)
	}
	if got := (&Plan{Connections: 3}).StageSpans(); got != nil {
		t.Errorf("no stages: StageSpans() = %v, want nil", got)
	}
}

func TestTargetAt(t *testing.T) {
	p := Plan{Load: OpenLoop, Rate: 100, Stages: []Stage{{Duration: 10 * time.Second, Rate: 300}, {Duration: 10 * time.Second, Rate: 300}}}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{
		{-time.Second, 100}, {0, 100}, {5 * time.Second, 200}, {10 * time.Second, 300}, {15 * time.Second, 300}, {time.Hour, 300},
	} {
		if got := p.TargetAt(tc.at); got != tc.want {
			t.Errorf("TargetAt(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	c := Plan{Connections: 7}
	if got := c.TargetAt(time.Minute); got != 7 {
		t.Errorf("closed loop without stages: TargetAt = %v, want 7", got)
	}
}

// TestLoadExplicit: the load model is the field, never the other fields: a
// closed-loop plan with a rate, or an open-loop plan without one, is
// rejected with the field named.
func TestLoadExplicit(t *testing.T) {
	for _, tc := range []struct {
		p    Plan
		want string
	}{
		{Plan{URL: "https://x/", Rate: 100}, "rate = 100: a closed-loop plan has no rate"},
		{Plan{URL: "https://x/", Load: OpenLoop}, "rate = 0: an open-loop plan needs a rate"},
		{Plan{URL: "https://x/", Load: Load(9)}, "load = load(9): want closed or open"},
		{Plan{URL: "https://x/", Protocol: Protocol(9)}, "protocol = protocol(9): want h1, h2 or h3"},
	} {
		p := tc.p
		p.SetDefaults()
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.p, err, tc.want)
		}
	}
	if LoadFor(0, nil) != ClosedLoop || LoadFor(5, nil) != OpenLoop || LoadFor(0, []Stage{{Rate: 1}}) != OpenLoop || LoadFor(0, []Stage{{Connections: 1}}) != ClosedLoop {
		t.Errorf("LoadFor does not follow rate and the first stage's rate")
	}
}

// TestCheckTarget: Check returns the targets Validate parsed: the URL and
// each request's, in Entries' order.
func TestCheckTarget(t *testing.T) {
	p := Plan{URL: "https://127.0.0.1:8443/a?b"}
	p.SetDefaults()
	got, err := p.Check()
	if err != nil || got.Target.RequestURI != "/a?b" || got.Target.Port != "8443" || !got.Target.TLS ||
		len(got.Entries) != 1 || got.Entries[0] != got.Target {
		t.Fatalf("Check() = %+v, %v", got, err)
	}
	p.Mix = []Request{{Method: "GET", URL: "https://127.0.0.1:8443/x", Weight: 1}, {Method: "POST", URL: "https://127.0.0.1:8443/y?z", Weight: 2}}
	got, err = p.Check()
	if err != nil || len(got.Entries) != 2 || got.Entries[0].RequestURI != "/x" || got.Entries[1].RequestURI != "/y?z" {
		t.Fatalf("Check() with a mix = %+v, %v", got, err)
	}
	p.URL = "ftp://x/"
	if got, err := p.Check(); err == nil || got.Entries != nil || got.Target != (Target{}) {
		t.Fatalf("Check() of a bad URL = %+v, %v, want the zero Parsed and an error", got, err)
	}
}

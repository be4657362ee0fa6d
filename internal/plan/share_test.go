package plan

import (
	"strings"
	"testing"
	"time"
)

// TestShareCheck: a share from another machine passes only as exactly its
// part of a valid plan; each altered field is refused, naming it.
func TestShareCheck(t *testing.T) {
	p := Plan{URL: "https://127.0.0.1/", Connections: 10, Load: OpenLoop, Rate: 100, MaxConnections: 20,
		Stages: []Stage{{Duration: time.Second, Rate: 50}, {Duration: time.Second, Rate: 7}}}
	p.SetDefaults()
	for _, s := range Shares("run-1", p, 3) {
		if err := s.Check(); err != nil {
			t.Errorf("share %d of 3: %v", s.Index, err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(s *Share)
		want string
	}{
		{"bad plan", func(s *Share) { s.Plan.Connections = 0 }, "plan: connections = 0"},
		{"no run id", func(s *Share) { s.RunID = "" }, `run_id ""`},
		{"run id with a line break", func(s *Share) { s.RunID = "a\nb" }, `run_id "a\nb"`},
		{"long run id", func(s *Share) { s.RunID = strings.Repeat("x", MaxRunIDLen+1) }, "want 1 to 128 printable ASCII bytes"},
		{"count 0", func(s *Share) { s.Count = 0 }, "count 0: want 1 to the plan's 10 connections"},
		{"count above connections", func(s *Share) { s.Count = 11 }, "count 11"},
		{"negative index", func(s *Share) { s.Index = -1 }, "index -1: want 0 to 2 (count 3)"},
		{"index past count", func(s *Share) { s.Index = 3 }, "index 3"},
		{"connections", func(s *Share) { s.Connections = 5 }, "share 1 of 3: connections 5: want 3"},
		{"rate", func(s *Share) { s.Rate = 1 << 40 }, "rate 1099511627776: want 33"},
		{"max connections", func(s *Share) { s.MaxConnections = 0 }, "max_connections 0: want 7"},
		{"requests", func(s *Share) { s.Requests = 5 }, "requests 5: want 0"},
		{"stage targets short", func(s *Share) { s.StageTargets = s.StageTargets[:1] }, "stage_targets count 1: want 2"},
		{"stage target", func(s *Share) { s.StageTargets[1] = 1 << 40 }, "stage_targets[1] 1099511627776: want 2"},
	} {
		s := Shares("run-1", p, 3)[1]
		tc.edit(&s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestShareOfIsShares(t *testing.T) {
	p := Plan{URL: "https://127.0.0.1/", Connections: 7, Requests: 101, Stages: nil}
	p.SetDefaults()
	for n := 1; n <= 7; n++ {
		all := Shares("r", p, n)
		for i := range n {
			one := ShareOf("r", p, n, i)
			if one.Connections != all[i].Connections || one.Requests != all[i].Requests || one.Index != i || one.Count != n {
				t.Errorf("ShareOf(p, %d, %d) = %+v, want %+v", n, i, one, all[i])
			}
		}
	}
}

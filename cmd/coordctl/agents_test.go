package main

import (
	"testing"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func TestAgentsColumns(t *testing.T) {
	for _, tc := range []struct {
		m          *pb.NodeMeta
		allow, cap string
	}{
		{&pb.NodeMeta{AllowTargets: "127.0.0.0/8,::1"}, "127.0.0.0/8,::1", "-"},
		{&pb.NodeMeta{AllowTargets: "10.0.0.0/8", AllowTargetsOmitted: 3, MaxConnections: 50}, "10.0.0.0/8 (+3 more entries: see the agent's log)", "50"},
		{&pb.NodeMeta{AllowTargetsOmitted: 2}, "(2 entries: see the agent's log)", "-"},
		{&pb.NodeMeta{}, "?", "-"},
	} {
		if got := allowText(tc.m); got != tc.allow {
			t.Errorf("allowText(%v) = %q, want %q", tc.m, got, tc.allow)
		}
		if got := capText(tc.m.GetMaxConnections()); got != tc.cap {
			t.Errorf("capText(%d) = %q, want %q", tc.m.GetMaxConnections(), got, tc.cap)
		}
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestPartialReportFromProgress: the report coordctl builds after losing
// the coordinator holds every interval received (counters and latency
// merged), a window that ends with the last one, never the planned one,
// and says it is partial and why, in the text and the JSON model.
func TestPartialReportFromProgress(t *testing.T) {
	rc := &received{}
	rc.accepted(&pb.RunAccepted{RunId: "r1", Agents: 3})
	for k, n := range []int64{100, 200, 50} {
		h := hist.New()
		for range n {
			h.RecordMicros(int64(100 * (k + 1)))
		}
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		length := time.Second
		if k == 2 {
			length = 400 * time.Millisecond
		}
		rc.progress(&pb.Progress{RunId: "r1", Index: int32(k),
			Point:    &pb.TimelinePoint{Index: int32(k), Start: durationpb.New(time.Duration(k) * time.Second), Length: durationpb.New(length), Requests: n, Errors: 1, Latency: b, Agents: 3},
			Counters: &pb.Counters{Requests: n, Status: map[int32]int64{200: n}, Errors: map[string]int64{"reset": 1}, BytesRead: 10 * n}})
	}
	rc.lost = append(rc.lost, &pb.AgentLost{Agent: "a2", Error: "agent a2: silent for 4s", At: durationpb.New(1500 * time.Millisecond)})
	rep, err := rc.report(&pb.Plan{Url: "https://127.0.0.1:8443/", Connections: 6, Duration: durationpb.New(20 * time.Second)}, "lost the coordinator X during the run (EOF)")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Partial || rep.DurationS != 2.4 || rep.PlanDurationS != 20 || rep.Requests != 350 || rep.ErrorTotal() != 3 || rep.Issued != 353 || rep.BytesRead != 3500 {
		t.Errorf("partial %v, window %v of %v, requests %d, errors %d, issued %d, bytes %d; want true, 2.4 of 20, 350, 3, 353, 3500",
			rep.Partial, rep.DurationS, rep.PlanDurationS, rep.Requests, rep.ErrorTotal(), rep.Issued, rep.BytesRead)
	}
	if rep.RPS != 350/2.4 || rep.Latency == nil || rep.Latency.Count != 350 || rep.Latency.Max < 300 || rep.AgentCount != 3 || len(rep.Timeline) != 3 {
		t.Errorf("rps %v, latency %+v, agents %d, timeline %d", rep.RPS, rep.Latency, rep.AgentCount, len(rep.Timeline))
	}
	if len(rep.LostAgents) != 1 || rep.LostAgents[0].Name != "a2" {
		t.Errorf("lost agents %+v, want a2", rep.LostAgents)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Running 20s test @ https://127.0.0.1:8443/\n  3 agents and 6 connections\n",
		"  Lost agent a2 after 1.50s: silent for 4s",
		"  Partial: lost the coordinator X during the run (EOF); coordctl built this report from the 3 intervals it received",
		"  350 requests in 2.40s, ",
		"Agents: not known (the coordinator was lost)\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
}

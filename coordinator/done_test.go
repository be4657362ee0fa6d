package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func TestCheckDone(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 2, Duration: 10 * time.Second, Warmup: 2 * time.Second}
	p.SetDefaults()
	ws := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return ws.Add(d).UnixNano() }
	for _, tc := range []struct {
		d    *pb.Done
		want string
	}{
		{&pb.Done{Issued: 10, InFlight: 2, WindowEndUnixNano: at(10 * time.Second), FirstSendUnixNano: at(-2 * time.Second)}, ""},
		{&pb.Done{WindowEndUnixNano: at(-time.Second)}, ""}, // a stopped window that ended in the warm-up
		{&pb.Done{Issued: -1}, "done: issued = -1"},
		{&pb.Done{Issued: 1, InFlight: 2}, "done: in_flight 2 above issued 1"},
		{&pb.Done{WindowEndUnixNano: at(time.Hour)}, "done: window end 1h0m0s from the window's start: want -2s to 13s"},
		{&pb.Done{WindowEndUnixNano: at(-3 * time.Second)}, "done: window end -3s"},
		{&pb.Done{FirstSendUnixNano: at(-time.Hour)}, "done: first send -1h0m0s"},
		{&pb.Done{StageChangeUnixNano: []int64{1}}, "done: 1 stage changes for 0 stages: want at most 0"},
		{&pb.Done{MaxStreams: 5}, "done: max_streams 5: want 0 to the plan's 1"},
	} {
		err := checkDone(p, tc.d, ws)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkDone(%v) = %v, want %q", tc.d, err, tc.want)
		}
	}
}

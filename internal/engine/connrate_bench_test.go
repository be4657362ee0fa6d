package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// BenchmarkConnectionRateCost runs 2-s connection-rate windows (--cps) at
// 1,000 connections/s against the raw server in its own process, in clear
// text (the engine's own cost per connection, without TLS's), with 1
// request per connection and with none, and reports the client's CPU per
// connection (cpu-us/conn: this process only, getrusage(2)) and the
// missed starts. Run with -benchtime=1x.
func BenchmarkConnectionRateCost(b *testing.B) {
	url, _ := rawServerProcess(b)
	for _, k := range []int{1, 0} {
		b.Run(fmt.Sprintf("cps=1000/k=%d", k), func(b *testing.B) {
			for range b.N {
				p := plan.Plan{URL: url, Connections: 16, MaxConnections: 256, Load: plan.OpenLoop, Rate: 1000,
					ConnectionRate: true, RequestsPerConnection: k, Duration: 2 * time.Second, Timeout: 5 * time.Second}
				p.SetDefaults()
				e, err := New(context.Background(), Config{Share: plan.Shares("b", p, 1)[0]})
				if err != nil {
					b.Fatal(err)
				}
				var counts measure.Counts
				u0 := selfUsage()
				if _, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) { counts.Add(&iv.Counts) }); err != nil {
					b.Fatal(err)
				}
				u1 := selfUsage()
				e.Close()
				if counts.ConnectionsOpened == 0 {
					b.Fatal("no connection opened")
				}
				b.ReportMetric(float64((u1.cpu-u0.cpu).Microseconds())/float64(counts.ConnectionsOpened), "cpu-us/conn")
				b.ReportMetric(float64(counts.ConnectionsOpened), "conns")
				b.ReportMetric(float64(counts.Missed), "missed")
			}
		})
	}
}

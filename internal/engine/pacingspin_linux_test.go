package engine

import (
	"net/http"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestPlanPacingSpin: a plan's PacingSpin gives every open-loop worker
// the spinning slot clock (a plan without it, the plain one), over
// HTTP/1.1 and through HTTP/2's session pacer alike, and a run sends the
// schedule's requests, every one, through it. (That a spinning wait never
// ends before its instant is TestSlotTimerfdWaits'.)
func TestPlanPacingSpin(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		start, proto := tlsTarget, plan.H1
		if h2 {
			name, start, proto = "HTTP/2", tlsTargetH2, plan.H2
		}
		t.Run(name, func(t *testing.T) {
			srv, served, ca := start(t, func(http.ResponseWriter, *http.Request) {})
			p := plan.Plan{URL: srv.URL, Connections: 8, Load: plan.OpenLoop, Rate: 400, Duration: time.Second,
				Protocol: proto, TLS: plan.TLS{CAPEM: ca}}
			for _, w := range newEngine(t, p, 8).workers {
				if c, ok := w.clock.(*slotClock); !ok || c.spin {
					t.Fatalf("without pacing_spin: worker clock %T, want a slotClock that does not spin", w.clock)
				}
			}
			p.PacingSpin = true
			e := newEngine(t, p, 8)
			for _, w := range e.workers {
				if c, ok := w.clock.(*slotClock); !ok || !c.spin {
					t.Fatalf("with pacing_spin: worker clock %T, want the spinning slotClock", w.clock)
				}
			}
			res, total := runCounted(t, e)
			if got := total.Requests + total.ErrorTotal() + res.InFlight; got != 400 || served.Load() != 400 {
				t.Errorf("sent %d, served %d, want 400 = 400/s × 1 s", got, served.Load())
			}
		})
	}
}

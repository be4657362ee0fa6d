package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC26DNSOncePerAgent covers field case C26. vegeta's throughput
// collapsed when the target was a host name, because every request waited
// for a lookup the resolver rate-limited, and locust's response times grew
// to minutes when every user resolved on its own: the latency measured DNS.
// Here a DNS server answers svc.test → 127.0.0.1 (TTL 60) 200 ms late and
// counts queries; the target is https://svc.test:PORT/ through it. What
// must hold, with keep-alive (a) and without (b): a few queries per agent
// (one lookup, A and AAAA), not one per request or per connection; every
// request completes; latency p50 stays far below the 200 ms a lookup costs
// (the case's < 10 ms in (a) and < 20 ms in (b) are judged when other
// loads on the machine did not starve the test); SNI and Host carry
// svc.test.
func TestCaseC26DNSOncePerAgent(t *testing.T) {
	const agents = 2
	for _, tc := range []struct {
		name      string
		keepAlive bool
		total     int64
		p50Max    time.Duration
	}{
		{"a_keepalive", true, 20000, 10 * time.Millisecond},
		{"b_no_keepalive", false, 2000, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dnsSrv := c26StartDNS(t, "svc.test.", 200*time.Millisecond)
			var badHost atomic.Int64
			var wantHost atomic.Value
			resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
			respClose := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			// X25519 alone keeps full handshakes cheap (no ML-KEM), so that
			// run (b), a handshake per request, measures the request path
			// rather than key exchange CPU.
			srv := startRaw(t, &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
				for {
					_, h, err := readRequest(br, st)
					if err != nil {
						return
					}
					if h["host"] != wantHost.Load() {
						badHost.Add(1)
					}
					time.Sleep(time.Millisecond)
					if strings.EqualFold(h["connection"], "close") {
						_, _ = c.Write(respClose)
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			})
			host := "svc.test:" + srv.Port()
			wantHost.Store(host)
			p := plan.Plan{
				URL: "https://" + host + "/", Connections: 10, Requests: tc.total,
				NoKeepAlive: !tc.keepAlive, Resolver: dnsSrv.addr,
				Timeout: 10 * time.Second, // a busy machine must not turn slow handshakes into errors
			}
			watch := startSchedWatch()
			t.Cleanup(watch.stop)
			run := runCase(t, p, agents, 1)
			watch.stop()
			r := run.Report
			queries := dnsSrv.queries.Load()
			lost := watch.lost(r.StartedAt, r.StartedAt.Add(time.Duration(r.DurationS*float64(time.Second))))
			t.Logf("completed %d, errors %v, DNS queries %d (%s), server accepted %d, window %.2f s, elapsed %v, test process stalled %.1f %% of the window; latency µs %+v; agent failures: %q",
				r.Requests, r.Errors, queries, dnsSrv.log(), srv.Stats.Accepted.Load(), r.DurationS, run.Elapsed, 100*lost, r.Latency, agentFailures(r))

			if queries < 1 {
				t.Errorf("the DNS server saw no query: the plan's resolver was not used")
			}
			if queries > 4*agents {
				t.Errorf("%d DNS queries for %d agents, want at most %d (one lookup per agent: A and AAAA, perhaps one retry)", queries, agents, 4*agents)
			}
			if r.Requests != tc.total || r.ErrorTotal() != 0 || r.Status["200"] != tc.total {
				t.Errorf("completed %d, errors %v, status %v: want %d responses 200", r.Requests, r.Errors, r.Status, tc.total)
			}
			if !tc.keepAlive {
				if got := srv.Stats.Accepted.Load(); got != tc.total {
					t.Errorf("server accepted %d connections, want %d (one per request)", got, tc.total)
				}
				if r.DurationS > 30 {
					if lost < 0.01 {
						t.Errorf("the run took %.1f s, want at most 30 s", r.DurationS)
					} else {
						t.Logf("the run took %.1f s, want at most 30 s (not judged: the test process stalled %.1f %% of the window)", r.DurationS, 100*lost)
					}
				}
			}
			// A lookup costs 200 ms: with one per request, p50 could not
			// be below 200 ms however fast the machine. The case's tighter
			// bound is judged when the test process ran without stalls (a
			// machine too busy adds queueing to every request).
			switch {
			case r.Latency == nil:
				t.Errorf("no latency samples")
			case r.Latency.P50 >= 200_000:
				t.Errorf("latency p50 = %d µs, want far below the 200 ms a lookup costs", r.Latency.P50)
			case r.Latency.P50 >= tc.p50Max.Microseconds() && lost < 0.01:
				t.Errorf("latency p50 = %d µs, want < %v", r.Latency.P50, tc.p50Max)
			case r.Latency.P50 >= tc.p50Max.Microseconds():
				t.Logf("latency p50 = %d µs, want < %v (not judged: the test process stalled %.1f %% of the window)", r.Latency.P50, tc.p50Max, 100*lost)
			}
			srv.Stats.mu.Lock()
			sni := append([]string(nil), srv.Stats.SNI...)
			srv.Stats.mu.Unlock()
			for i, name := range sni {
				if name != "svc.test" {
					t.Errorf("handshake %d of %d: SNI %q, want svc.test", i+1, len(sni), name)
					break
				}
			}
			if n := badHost.Load(); n != 0 {
				t.Errorf("%d requests without Host: %s", n, host)
			}
		})
	}
}

// c26DNS is a DNS server on 127.0.0.1 (UDP and TCP, one port) that answers
// A queries for one name with 127.0.0.1 (TTL 60), other types for it with
// no data, and other names with NXDOMAIN, each after a delay. It counts
// every query.
type c26DNS struct {
	addr    string
	queries atomic.Int64
	mu      chan struct{}
	seen    []string
}

func c26StartDNS(t *testing.T, name string, delay time.Duration) *c26DNS {
	t.Helper()
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 { // one port for both UDP and TCP
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("listen for DNS: %v", err)
	}
	d := &c26DNS{addr: pc.LocalAddr().String(), mu: make(chan struct{}, 1)}
	quit := make(chan struct{})
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		d.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		for _, q := range req.Question {
			d.mu <- struct{}{}
			d.seen = append(d.seen, fmt.Sprintf("%s %s/%s", w.RemoteAddr().Network(), q.Name, dns.TypeToString[q.Qtype]))
			<-d.mu
			switch {
			case !strings.EqualFold(q.Name, name):
				m.Rcode = dns.RcodeNameError
			case q.Qtype == dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-quit:
			timer.Stop()
		}
		_ = w.WriteMsg(m)
	})
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: ln, Handler: handler}
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	done := make(chan struct{}, 2)
	go func() { _ = udp.ActivateAndServe(); done <- struct{}{} }()
	go func() { _ = tcp.ActivateAndServe(); done <- struct{}{} }()
	<-started
	<-started
	t.Cleanup(func() {
		close(quit)
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
		<-done
		<-done
	})
	return d
}

// log lists the queries seen.
func (d *c26DNS) log() string {
	d.mu <- struct{}{}
	defer func() { <-d.mu }()
	return strings.Join(d.seen, ", ")
}

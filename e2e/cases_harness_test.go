package e2e

// Harness for the field failure cases (TestCaseCxx): raw-socket TLS
// servers that keep their own counters, and a one-call run of a plan
// through a real in-process cluster (coordinator, agents, engine, merge,
// report).

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/tlsgen"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

var (
	caseCAOnce sync.Once
	caseCA     *tlsgen.Bundle
)

// testCA returns the package's throwaway CA and leaf (SANs localhost,
// app.test, svc.test, 127.0.0.1, ::1).
func testCA(t testing.TB) *tlsgen.Bundle {
	t.Helper()
	caseCAOnce.Do(func() {
		b, err := tlsgen.New()
		if err != nil {
			panic(err)
		}
		caseCA = b
	})
	return caseCA
}

// rawStats are a raw server's own counters.
type rawStats struct {
	Accepted          atomic.Int64 // TCP connections accepted
	HandshakesFull    atomic.Int64
	HandshakesResumed atomic.Int64
	Requests          atomic.Int64 // request heads read (by readRequest)
	mu                sync.Mutex
	SNI               []string // server name per handshake ("" = none)
}

// rawServer is a TCP (optionally TLS) server whose handler writes bytes by
// hand, so no framework normalizes framing.
type rawServer struct {
	ln    net.Listener
	tls   bool
	Stats *rawStats
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
	done  chan struct{}
}

// rawHandler serves one accepted connection; idx counts accepted
// connections from 0. For TLS servers the handshake is done.
type rawHandler func(c net.Conn, br *bufio.Reader, idx int64, st *rawStats)

// startRaw starts a raw server on 127.0.0.1:0. cfg nil: plain TCP; else
// TLS with cfg (the harness fills Certificates from testCA when empty and
// records SNI and resumption).
func startRaw(t *testing.T, cfg *tls.Config, h rawHandler) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, tls: cfg != nil, Stats: &rawStats{}, conns: map[net.Conn]bool{}, done: make(chan struct{})}
	if cfg != nil {
		cfg = cfg.Clone()
		if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil {
			cfg.Certificates = []tls.Certificate{testCA(t).Cert}
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for idx := int64(0); ; idx++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Stats.Accepted.Add(1)
			s.track(c, true)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { c.Close(); s.track(c, false) }()
				conn := c
				if cfg != nil {
					tc := tls.Server(c, cfg)
					_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
					if err := tc.Handshake(); err != nil {
						return
					}
					_ = tc.SetDeadline(time.Time{})
					st := tc.ConnectionState()
					if st.DidResume {
						s.Stats.HandshakesResumed.Add(1)
					} else {
						s.Stats.HandshakesFull.Add(1)
					}
					s.Stats.mu.Lock()
					s.Stats.SNI = append(s.Stats.SNI, st.ServerName)
					s.Stats.mu.Unlock()
					conn = tc
				}
				h(conn, bufio.NewReader(conn), idx, s.Stats)
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *rawServer) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		s.conns[c] = true
	} else {
		delete(s.conns, c)
	}
}

// Close stops accepting, closes every connection and waits for handlers.
func (s *rawServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Port returns the listening port.
func (s *rawServer) Port() string {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return port
}

// URL returns scheme://127.0.0.1:PORT/path.
func (s *rawServer) URL(path string) string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.ln.Addr().String() + path
}

// readRequest reads one request head (and a Content-Length body) and
// counts it. It returns the request line and headers (lowercased names).
func readRequest(br *bufio.Reader, st *rawStats) (line string, headers map[string]string, err error) {
	line, err = br.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	headers = map[string]string{}
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		headers[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
	}
	if cl := headers["content-length"]; cl != "" && cl != "0" {
		var n int
		for _, c := range cl {
			n = n*10 + int(c-'0')
		}
		if _, err := br.Discard(n); err != nil {
			return "", nil, err
		}
	}
	st.Requests.Add(1)
	return strings.TrimRight(line, "\r\n"), headers, nil
}

// caseRun is the outcome of a plan run through the cluster.
type caseRun struct {
	Report   *report.Report
	Progress []*pb.Progress // one per merged interval
	Elapsed  time.Duration  // wall time of RunPlan
}

// runCase runs p through a fresh in-process cluster of `agents` agents
// (each with `workers` workers) and returns the report. p's TLS CA
// defaults to the package CA.
func runCase(t *testing.T, p plan.Plan, agents, workers int) caseRun {
	t.Helper()
	if len(p.TLS.CAPEM) == 0 && !p.TLS.Insecure {
		p.TLS.CAPEM = testCA(t).CAPEM
	}
	c, err := localcluster.Start(context.Background(), agents, workers, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var out caseRun
	start := time.Now()
	res, err := c.Coordinator.RunPlan(context.Background(), p, func(pr *pb.Progress) { out.Progress = append(out.Progress, pr) })
	out.Elapsed = time.Since(start)
	if err != nil {
		t.Fatalf("run %s: %v", p.URL, err)
	}
	if out.Report, err = wire.ReportFromResult(res); err != nil {
		t.Fatal(err)
	}
	r := out.Report
	if got := r.Requests + r.ErrorTotal() + r.InFlight; got != r.Issued {
		t.Errorf("accounting: completed %d + errors %d + in flight %d = %d, issued %d", r.Requests, r.ErrorTotal(), r.InFlight, got, r.Issued)
	}
	return out
}

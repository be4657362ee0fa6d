package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// TestCaseC21SNIForIPTargets: C21, SNI when the target is an IP address.
//
// In the field, load tools got SNI wrong in both directions: one sent no
// SNI at all, so servers that pick a certificate (or a virtual host) by
// name failed the handshake; others, given an IP, had no way to keep a
// proper name in SNI and Host while dialling that IP; and some put the IP
// literal itself into SNI, which RFC 6066 forbids and strict servers answer
// with an unrecognized_name alert.
//
// The server here picks its certificate by SNI, each from its own CA:
// no SNI gets a certificate whose only SAN is IP 127.0.0.1, "app.test" and
// "localhost" get certificates with only that DNS name, and an IP literal
// or any other name gets an unrecognized_name alert. It logs SNI per
// handshake and Host per request. With verification on, c=4, N=400 and one
// request per connection, every run must complete 400 requests with no
// error and:
//   - (a) https://127.0.0.1:P/: no SNI extension on all 400 handshakes
//     (so the certificate was verified against its IP SAN), Host 127.0.0.1:P;
//   - (b) https://app.test:P/ connected to 127.0.0.1:P: SNI app.test on
//     400/400, Host app.test:P;
//   - (c) https://localhost:P/: SNI localhost on 400/400, Host localhost:P.
func TestCaseC21SNIForIPTargets(t *testing.T) {
	noSNI := c21Bundle(t, "127.0.0.1")
	app := c21Bundle(t, "app.test")
	local := c21Bundle(t, "localhost")
	caPEM := bytes.Join([][]byte{noSNI.CAPEM, app.CAPEM, local.CAPEM}, nil)

	srv0, _ := c21StartSNIServer(t, noSNI, app, local)

	// The fixture itself must refuse an unknown name, or the runs below
	// would prove nothing about a wrong SNI.
	d := tls.Dialer{Config: &tls.Config{ServerName: "other.test", RootCAs: app.CAPool}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+srv0.Port()); err == nil {
		c.Close()
		t.Fatal("fixture: handshake with SNI other.test succeeded, want unrecognized_name")
	} else if !strings.Contains(err.Error(), "unrecognized name") {
		t.Fatalf("fixture: handshake with SNI other.test: %v, want an unrecognized_name alert", err)
	}
	srv0.Close()

	// The engine dials the first address of the name; keep the traffic on
	// 127.0.0.1 (where the server listens) without changing SNI if
	// localhost resolves elsewhere first.
	localhostFirst := true
	if addrs, err := net.DefaultResolver.LookupHost(context.Background(), "localhost"); err != nil || len(addrs) == 0 || addrs[0] != "127.0.0.1" {
		t.Logf("localhost resolves to %v (%v): connecting to 127.0.0.1 explicitly", addrs, err)
		localhostFirst = false
	}

	runs := []struct {
		name               string
		host               string // URL host
		connectTo, wantSNI string
	}{
		{"a_ip_target", "127.0.0.1", "", ""},
		{"b_connect_to", "app.test", "127.0.0.1", "app.test"},
		{"c_localhost", "localhost", map[bool]string{true: "", false: "127.0.0.1"}[localhostFirst], "localhost"},
	}
	const n = 400
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			srv, sl := c21StartSNIServer(t, noSNI, app, local)
			port := srv.Port()
			url := "https://" + r.host + ":" + port + "/"
			connectTo := ""
			if r.connectTo != "" {
				connectTo = r.connectTo + ":" + port
			}
			wantHost := r.host + ":" + port
			out := runCase(t, plan.Plan{
				URL: url, ConnectTo: connectTo, Connections: 4, Requests: n, NoKeepAlive: true,
				Timeout: 5 * time.Second,
				// X25519 only: the hybrid ML-KEM key share is pure Go and several
				// times slower under the race detector; the group is not under test.
				TLS: plan.TLS{CAPEM: caPEM, Curves: []string{"X25519"}},
			}, 1, 2)
			rep := out.Report
			t.Logf("%s: %d requests in %v, errors %v, connections %d, handshakes %+v", r.name, rep.Requests, out.Elapsed, rep.Errors, rep.ConnectionsOpened, rep.Handshakes)

			if rep.ErrorTotal() != 0 || rep.Errors["tls"] != 0 {
				t.Errorf("errors %v, want none (no handshake error)", rep.Errors)
			}
			if rep.Requests != n || rep.Status["200"] != n || rep.InFlight != 0 {
				t.Errorf("completed %d (status %v, in flight %d), want %d x 200", rep.Requests, rep.Status, rep.InFlight, n)
			}
			if rep.ConnectionsOpened != n || rep.Handshakes.Full+rep.Handshakes.Resumed != n {
				t.Errorf("connections opened %d, handshakes %+v: want %d (one per request)", rep.ConnectionsOpened, rep.Handshakes, n)
			}

			sl.mu.Lock()
			gotHellos, gotHosts, gotRefused := append([]string(nil), sl.hellos...), append([]string(nil), sl.hosts...), sl.refused
			sl.mu.Unlock()
			srv.Stats.mu.Lock()
			sni := append([]string(nil), srv.Stats.SNI...)
			srv.Stats.mu.Unlock()

			if gotRefused != 0 {
				t.Errorf("server refused %d handshakes (IP literal or unknown SNI); SNI seen: %v", gotRefused, c21Tally(gotHellos))
			}
			if len(sni) != n || srv.Stats.HandshakesFull.Load()+srv.Stats.HandshakesResumed.Load() != n {
				t.Errorf("server completed %d handshakes (%d full, %d resumed), want %d", len(sni), srv.Stats.HandshakesFull.Load(), srv.Stats.HandshakesResumed.Load(), n)
			}
			if got := c21Tally(sni); len(got) != 1 || got[r.wantSNI] != n {
				t.Errorf("server SNI per handshake %v, want %q on all %d", got, r.wantSNI, n)
			}
			if got := c21Tally(gotHosts); len(got) != 1 || got[wantHost] != n {
				t.Errorf("server Host per request %v, want %q on all %d", got, wantHost, n)
			}
			if got := srv.Stats.Requests.Load(); got != n || rep.Issued != n {
				t.Errorf("server received %d requests, report issued %d: want %d", got, rep.Issued, n)
			}
		})
	}
}

// c21Bundle makes a CA and a leaf certificate for hosts.
func c21Bundle(t *testing.T, hosts ...string) *tlsgen.Bundle {
	t.Helper()
	b, err := tlsgen.New(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// c21Tally counts equal strings.
func c21Tally(xs []string) map[string]int {
	m := map[string]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}

// c21SNILog is what the SNI server saw.
type c21SNILog struct {
	mu      sync.Mutex
	hellos  []string // SNI of every ClientHello, including refused ones
	refused int      // handshakes refused with unrecognized_name
	hosts   []string // Host header of every request
}

// c21StartSNIServer starts a raw TLS server that picks its certificate by SNI
// (none: noSNI's, whose only SAN is IP 127.0.0.1; app.test and localhost:
// their own) and refuses any other SNI, an IP literal included, with an
// unrecognized_name alert. It answers every request 200 with a 2-byte body
// and keeps the connection open.
func c21StartSNIServer(t *testing.T, noSNI, app, local *tlsgen.Bundle) (*rawServer, *c21SNILog) {
	sl := &c21SNILog{}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sl.mu.Lock()
			defer sl.mu.Unlock()
			sl.hellos = append(sl.hellos, hi.ServerName)
			switch hi.ServerName {
			case "":
				return &noSNI.Cert, nil
			case "app.test":
				return &app.Cert, nil
			case "localhost":
				return &local.Cert, nil
			}
			// An IP literal or an unknown name. With no Certificates in
			// the config, (nil, nil) makes crypto/tls answer with an
			// unrecognized_name alert.
			sl.refused++
			return nil, nil
		},
	}
	srv := startRaw(t, cfg, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
		for {
			_, h, err := readRequest(br, st)
			if err != nil {
				return
			}
			sl.mu.Lock()
			sl.hosts = append(sl.hosts, h["host"])
			sl.mu.Unlock()
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")); err != nil {
				return
			}
		}
	})
	return srv, sl
}

package nginxtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/target"
)

func clientFor(t *testing.T, s *Server, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CAPEM()) {
		t.Fatal("CAPEM holds no certificate")
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func fetch(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, body
}

func TestKeepAliveRequestsAreLoggedOnOneConnection(t *testing.T) {
	s := Start(t, Options{})
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") || s.URL() != "https://"+s.Addr()+"/" {
		t.Fatalf("URL() = %q, Addr() = %q", s.URL(), s.Addr())
	}
	c := clientFor(t, s, false)
	want := target.DefaultBody()
	const n = 10
	for i := range n {
		resp, body := fetch(t, c, s.URL()+"?i="+strconv.Itoa(i))
		if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/1.1" {
			t.Fatalf("request %d: %s %d", i, resp.Proto, resp.StatusCode)
		}
		if resp.ContentLength != int64(len(want)) || !bytes.Equal(body, want) {
			t.Fatalf("request %d: ContentLength %d, body %d bytes; want the %d-byte default page", i, resp.ContentLength, len(body), len(want))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html" {
			t.Fatalf("Content-Type = %q, want text/html", ct)
		}
	}

	lines := s.WaitLogStable(t, 0)
	if len(lines) != n {
		t.Fatalf("access log has %d lines, want %d:\n%v", len(lines), n, lines)
	}
	for i, l := range lines {
		if l.Status != 200 || l.Method != "GET" || l.Protocol != "HTTP/1.1" || l.BodyBytes != int64(len(want)) {
			t.Errorf("line %d: %+v", i, l)
		}
		if l.Connection != lines[0].Connection {
			t.Errorf("line %d on connection %d, want %d (keep-alive)", i, l.Connection, lines[0].Connection)
		}
		if l.ConnectionRequests != int64(i+1) {
			t.Errorf("line %d: connection_requests %d, want %d", i, l.ConnectionRequests, i+1)
		}
		if wantURI := "/?i=" + strconv.Itoa(i); l.URI != wantURI {
			t.Errorf("line %d: URI %q, want %q", i, l.URI, wantURI)
		}
		if !strings.HasPrefix(l.TLSProtocol, "TLSv1.") {
			t.Errorf("line %d: TLS protocol %q", i, l.TLSProtocol)
		}
	}
}

func TestHTTP2AndSessionResumption(t *testing.T) {
	s := Start(t, Options{HTTP2: true})

	c := clientFor(t, s, true)
	for range 5 {
		resp, _ := fetch(t, c, s.URL()+"h2")
		if resp.Proto != "HTTP/2.0" || resp.StatusCode != http.StatusOK {
			t.Fatalf("got %s %d, want HTTP/2.0 200", resp.Proto, resp.StatusCode)
		}
	}
	lines := s.WaitLogStable(t, 0)
	if len(lines) != 5 {
		t.Fatalf("access log has %d lines, want 5", len(lines))
	}
	for i, l := range lines {
		if l.Protocol != "HTTP/2.0" || l.Connection != lines[0].Connection || l.URI != "/h2" {
			t.Errorf("line %d: %+v, want HTTP/2.0 on one connection", i, l)
		}
	}

	// Three fresh HTTP/1.1 connections sharing a session cache: the first
	// handshake is full, the others resume.
	cfg := s.ClientTLSConfig()
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	c2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	for range 3 {
		resp, _ := fetch(t, c2, s.URL()+"resume")
		if resp.Proto != "HTTP/1.1" {
			t.Fatalf("proto %s without ForceAttemptHTTP2, want HTTP/1.1", resp.Proto)
		}
	}
	lines = s.WaitLogStable(t, 0)
	if len(lines) != 8 {
		t.Fatalf("access log has %d lines, want 8", len(lines))
	}
	r := lines[5:]
	if r[0].SessionReused || !r[1].SessionReused || !r[2].SessionReused {
		t.Errorf("session reuse = %v %v %v, want false true true", r[0].SessionReused, r[1].SessionReused, r[2].SessionReused)
	}
	if r[0].Connection == r[1].Connection || r[1].Connection == r[2].Connection {
		t.Errorf("DisableKeepAlives requests shared a connection: %d %d %d", r[0].Connection, r[1].Connection, r[2].Connection)
	}
}

func TestWorkersCustomBodyAndStop(t *testing.T) {
	body := []byte("<p>hello nginx</p>\n")
	s := Start(t, Options{Workers: 2, Body: body})

	// Workers fork asynchronously; poll until both exist.
	deadline := time.Now().Add(5 * time.Second)
	for len(s.WorkerPIDs()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("worker pids %v, want 2 workers", s.WorkerPIDs())
		}
		time.Sleep(10 * time.Millisecond)
	}

	c := clientFor(t, s, false)
	for _, path := range []string{"", "any/path.html"} {
		resp, got := fetch(t, c, s.URL()+path)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
			t.Fatalf("GET /%s: %d %q, want 200 %q", path, resp.StatusCode, got, body)
		}
	}
	ca, err := os.ReadFile(s.CAFile())
	if err != nil || !bytes.Equal(ca, s.CAPEM()) {
		t.Fatalf("CAFile content differs from CAPEM (err %v)", err)
	}
	conf, err := os.ReadFile(s.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "/etc/nginx") || strings.Contains(string(conf), "/var/") {
		t.Errorf("config refers to system paths:\n%s", conf)
	}

	pid := s.PID()
	c.CloseIdleConnections()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && runtime.GOOS == "linux" {
		t.Errorf("nginx master %d still exists after Stop", pid)
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("%s still accepting after Stop", s.Addr())
	}
}

func TestParseLogLine(t *testing.T) {
	l, err := ParseLogLine("7 3 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.2 /a b?c=d 600")
	if err != nil {
		t.Fatal(err)
	}
	want := LogLine{Connection: 7, ConnectionRequests: 3, SessionReused: true, Protocol: "HTTP/1.1", TLSProtocol: "TLSv1.3",
		Status: 200, Method: "GET", RemoteAddr: "127.0.0.2", URI: "/a b?c=d", BodyBytes: 600, Raw: "7 3 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.2 /a b?c=d 600"}
	if l != want {
		t.Errorf("got %+v\nwant %+v", l, want)
	}

	l, err = ParseLogLine("9 1 . HTTP/1.1 TLSv1.2 400 - 127.0.0.1 - 0")
	if err != nil {
		t.Fatal(err)
	}
	if l.SessionReused || l.Status != 400 || l.Method != "-" || l.URI != "-" || l.BodyBytes != 0 {
		t.Errorf("got %+v", l)
	}

	for _, bad := range []string{
		"",
		"1 2 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.1",
		"1 2 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.1 /",
		"x 2 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.1 / 600",
		"1 2 r HTTP/1.1 TLSv1.3 ok GET 127.0.0.1 / 600",
		"1 2 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.1 / many",
		"1 2 maybe HTTP/1.1 TLSv1.3 200 GET 127.0.0.1 / 600",
		"1  2 r HTTP/1.1 TLSv1.3 200 GET 127.0.0.1 / 600",
	} {
		if l, err := ParseLogLine(bad); err == nil {
			t.Errorf("ParseLogLine(%q) = %+v, want error", bad, l)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"1.22.1", false}, {"1.25.0", false}, {"1.25.1", true}, {"1.26.0", true}, {"2.0.0", true}, {"1.3.99", false}} {
		if got := versionAtLeast(c.v, 1, 25, 1); got != c.want {
			t.Errorf("versionAtLeast(%q, 1.25.1) = %v, want %v", c.v, got, c.want)
		}
	}
}

// recordingTB captures Skip and Fatal calls from Start; like the real ones
// they end the calling goroutine.
type recordingTB struct {
	testing.TB
	skipped, fatal string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingNginxSkipsOrFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	saved := fallbackBinaries
	fallbackBinaries = []string{"/nonexistent/nginx"}
	t.Cleanup(func() { fallbackBinaries = saved })

	run := func() *recordingTB {
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Start(r, Options{})
		}()
		<-done
		return r
	}

	t.Setenv(RequireEnv, "")
	if r := run(); r.skipped == "" || r.fatal != "" {
		t.Errorf("without %s: skipped=%q fatal=%q, want a skip", RequireEnv, r.skipped, r.fatal)
	}
	t.Setenv(RequireEnv, "1")
	if r := run(); r.fatal == "" || r.skipped != "" || !strings.Contains(r.fatal, "not installed") {
		t.Errorf("with %s=1: skipped=%q fatal=%q, want a failure saying nginx is not installed", RequireEnv, r.skipped, r.fatal)
	}
}

func TestRetriesWhenPortIsTaken(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	saved := pickPort
	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return busyPort, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = saved })

	s := Start(t, Options{})
	if calls != 2 || s.Port() == busyPort {
		t.Fatalf("pickPort called %d times, port %d (busy %d); want a retry on a new port", calls, s.Port(), busyPort)
	}
	resp, _ := fetch(t, clientFor(t, s, false), s.URL())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestStopKillsUnresponsiveNginx(t *testing.T) {
	s := Start(t, Options{Workers: 2})
	deadline := time.Now().Add(5 * time.Second)
	for len(s.WorkerPIDs()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("worker pids %v, want 2 workers", s.WorkerPIDs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	workers := s.WorkerPIDs()
	// A stopped master cannot act on SIGQUIT, so Stop must fall back to
	// killing it and its workers.
	if err := syscall.Kill(s.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := s.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Stop of a stopped master = %v, want a killed error", err)
	}
	if d := time.Since(start); d < StopTimeout || d > StopTimeout+3*time.Second {
		t.Errorf("Stop took %v, want about %v", d, StopTimeout)
	}
	// Killed workers are reparented and reaped by init; poll until gone.
	for _, pid := range workers {
		for {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(data), ") Z ") {
				break // gone, or a zombie awaiting reaping: no longer serving
			}
			if time.Now().After(deadline.Add(StopTimeout + 5*time.Second)) {
				t.Fatalf("worker %d still alive after Stop: %s", pid, data)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("%s still accepting after Stop killed nginx", s.Addr())
	}
}

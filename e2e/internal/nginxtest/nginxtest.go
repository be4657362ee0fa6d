package nginxtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/target"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// RequireEnv is the environment variable that turns a missing nginx binary
// from a skipped test into a failed one when set to "1" (for CI, where the
// end-to-end tests must run).
const RequireEnv = "PHALANX_REQUIRE_NGINX"

// Timing bounds used by the fixture.
const (
	// StartTimeout bounds how long Start waits for a TLS handshake with the
	// new nginx to succeed, per start attempt.
	StartTimeout = 10 * time.Second
	// StopTimeout is how long Stop waits after SIGQUIT (graceful shutdown)
	// before it kills the master and worker processes.
	StopTimeout = 5 * time.Second
	// DefaultLogQuiet is the quiet period WaitLogStable uses when given a
	// non-positive one: the access log must not grow for this long.
	DefaultLogQuiet = 200 * time.Millisecond
	// LogWaitTimeout bounds how long WaitLogStable waits for the access log
	// to become stable.
	LogWaitTimeout = 5 * time.Second
	// startAttempts is how many ports Start tries when bind fails because
	// another process took the port it picked.
	startAttempts = 5
)

// LogFormat is the nginx log_format string of the fixture's access log
// (format name "phalanx"): ten space-separated fields, parsed by
// ParseLogLine into a LogLine. nginx writes "-" for empty values.
const LogFormat = "$connection $connection_requests $ssl_session_reused $server_protocol " +
	"$ssl_protocol $status $request_method $remote_addr $request_uri $body_bytes_sent"

// fallbackBinaries are tried, in order, when nginx is not on PATH (on
// Debian it lives in /usr/sbin, which an unprivileged PATH may lack).
var fallbackBinaries = []string{"/usr/sbin/nginx"}

// Options configures Start. The zero value is valid.
type Options struct {
	// Workers is the number of nginx worker processes
	// (worker_processes). Zero or negative means 1.
	Workers int
	// Body is the content of the static index.html served for every URI
	// with status 200 and Content-Type text/html. Nil or empty means
	// target.DefaultBody() (600 bytes), so nginx and the built-in target
	// serve identical pages.
	Body []byte
	// HTTP2 enables HTTP/2 (ALPN h2) on the TLS listener in addition to
	// HTTP/1.1.
	HTTP2 bool
	// KeepaliveTimeout is nginx's keepalive_timeout: how long it keeps an
	// idle keep-alive connection open before closing it. Zero means 60 s;
	// it is written in whole milliseconds.
	KeepaliveTimeout time.Duration
	// Server is extra nginx directives placed inside the server block
	// before its "location /", e.g. further locations. Empty means none.
	Server string
}

// LogLine is one parsed access-log line (see LogFormat). Numeric fields
// that nginx logged as "-" are zero.
type LogLine struct {
	// Connection is nginx's connection serial number ($connection); lines
	// with equal values were served on the same TCP connection by the same
	// worker.
	Connection int64
	// ConnectionRequests is the 1-based number of this request on its
	// connection ($connection_requests).
	ConnectionRequests int64
	// SessionReused reports TLS session resumption ($ssl_session_reused
	// "r").
	SessionReused bool
	// Protocol is the HTTP protocol, e.g. "HTTP/1.1" or "HTTP/2.0".
	Protocol string
	// TLSProtocol is the TLS version, e.g. "TLSv1.3"; "-" without TLS.
	TLSProtocol string
	// Status is the response status code.
	Status int
	// Method is the request method, e.g. "GET".
	Method string
	// RemoteAddr is the client's address ($remote_addr).
	RemoteAddr string
	// URI is the original request URI including the query string.
	URI string
	// BodyBytes is the number of response body bytes sent.
	BodyBytes int64
	// Raw is the unparsed line, without the trailing newline.
	Raw string
}

// Server is a running private nginx started by Start. Its methods are safe
// for concurrent use.
type Server struct {
	bin       string
	version   string
	dir       string // prefix directory holding everything below
	confPath  string
	errorLog  string
	stderrLog string
	accessLog string
	caFile    string
	caPEM     []byte
	pool      *x509.CertPool
	port      int

	cmd     *exec.Cmd
	done    chan struct{} // closed when the master process has exited
	waitErr error         // cmd.Wait's result; read only after done is closed

	stopOnce   sync.Once
	stopErr    error
	stopCalled atomic.Bool // Stop was called by the test, not only by cleanup
}

// Start launches a private nginx for the duration of the test and returns
// it once it completes TLS handshakes on 127.0.0.1. The instance is stopped
// by a t.Cleanup registered by Start (see Stop).
//
// Everything lives under one fresh temporary directory: nginx.conf, the
// certificate files, html/index.html, the pid and lock files, the error and
// access logs and nginx's temp paths. The port is chosen by binding
// 127.0.0.1:0 and releasing it; if nginx then cannot bind it, Start retries
// with a new port a few times. When running as root, workers run as root
// (user root) so they can read the 0700 temporary directory.
//
// If nginx is not installed, Start calls t.Skip, or t.Fatal when
// PHALANX_REQUIRE_NGINX=1. Any other failure is t.Fatal, with the error
// log's content in the message.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("nginxtest: %v (%s=1 requires it; install it with apt-get install -y nginx)", err, RequireEnv)
		}
		t.Skipf("nginxtest: %v; skipping (set %s=1 to make this a failure)", err, RequireEnv)
	}
	version, err := binaryVersion(bin)
	if err != nil {
		t.Fatalf("nginxtest: %v", err)
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	body := opts.Body
	if len(body) == 0 {
		body = target.DefaultBody()
	}

	dir, err := prefixDir(t)
	if err != nil {
		t.Fatalf("nginxtest: %v", err)
	}
	s := &Server{
		bin:       bin,
		version:   version,
		dir:       dir,
		confPath:  filepath.Join(dir, "nginx.conf"),
		errorLog:  filepath.Join(dir, "error.log"),
		stderrLog: filepath.Join(dir, "nginx.stderr"),
		accessLog: filepath.Join(dir, "access.log"),
	}
	if err := s.prepare(body); err != nil {
		t.Fatalf("nginxtest: %v", err)
	}

	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			t.Fatalf("nginxtest: %v", err)
		}
		err = s.startOnce(port, opts)
		if err == nil {
			break
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts {
			t.Logf("nginxtest: port %d taken before nginx could bind it; retrying", port)
			continue
		}
		t.Fatalf("nginxtest: start nginx %s (attempt %d): %v\n%s", version, attempt, err, s.diagnostics())
	}

	t.Cleanup(func() {
		explicit := s.stopCalled.Load() // the test already saw Stop's error
		if err := s.stop(); err != nil && !explicit {
			t.Errorf("nginxtest: %v\n%s", err, s.diagnostics())
		} else if t.Failed() {
			t.Logf("nginxtest: nginx %s in %s\n%s", s.version, s.dir, s.diagnostics())
		}
	})
	return s
}

// Binary returns the path of the nginx executable: "nginx" looked up on
// PATH, else /usr/sbin/nginx. It returns an error if neither exists.
func Binary() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	for _, p := range fallbackBinaries {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("nginx is not installed (not on PATH nor at " + strings.Join(fallbackBinaries, ", ") + ")")
}

var (
	versionMu    sync.Mutex
	versionCache = map[string]string{}
	versionRE    = regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`)
)

// binaryVersion runs "bin -v" once per binary and returns "MAJOR.MINOR.PATCH".
func binaryVersion(bin string) (string, error) {
	versionMu.Lock()
	defer versionMu.Unlock()
	if v, ok := versionCache[bin]; ok {
		return v, nil
	}
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("run %s -v: %w (output %q)", bin, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("parse version from %s -v output %q", bin, out)
	}
	v := string(m[1]) + "." + string(m[2]) + "." + string(m[3])
	versionCache[bin] = v
	return v, nil
}

// versionAtLeast reports whether dotted version v is >= major.minor.patch.
func versionAtLeast(v string, major, minor, patch int) bool {
	var got [3]int
	for i, f := range strings.SplitN(v, ".", 3) {
		got[i], _ = strconv.Atoi(f)
	}
	want := [3]int{major, minor, patch}
	for i := range got {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return true
}

// prefixDir returns a temporary directory whose path can be written into
// nginx.conf verbatim inside double quotes. t.TempDir's name derives from
// the test name, which may hold characters nginx would interpret ($ starts
// a variable in several directives), so fall back to os.MkdirTemp.
func prefixDir(t testing.TB) (string, error) {
	dir := t.TempDir()
	if safeConfPath(dir) {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "phalanx-nginx-")
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if !safeConfPath(dir) {
		return "", fmt.Errorf("temp dir %q has characters nginx.conf cannot hold", dir)
	}
	return dir, nil
}

func safeConfPath(p string) bool {
	return !strings.ContainsAny(p, "\"'\\$;{}#") && !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// prepare writes the certificate files and the static page.
func (s *Server) prepare(body []byte) error {
	b, err := tlsgen.New()
	if err != nil {
		return err
	}
	tlsDir := filepath.Join(s.dir, "tls")
	htmlDir := filepath.Join(s.dir, "html")
	for _, d := range []string{tlsDir, htmlDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	caFile, _, _, err := b.WriteFiles(tlsDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(htmlDir, "index.html"), body, 0o644); err != nil {
		return fmt.Errorf("write index.html: %w", err)
	}
	s.caFile, s.caPEM, s.pool = caFile, b.CAPEM, b.CAPool
	return nil
}

// pickPort chooses the port for a start attempt; tests replace it.
var pickPort = freePort

// freePort binds 127.0.0.1:0, releases it and returns the port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("release port %d: %w", port, err)
	}
	return port, nil
}

// config renders nginx.conf for port.
func (s *Server) config(port int, opts Options) string {
	d := func(name string) string { return `"` + filepath.Join(s.dir, name) + `"` }
	listen := fmt.Sprintf("127.0.0.1:%d ssl", port)
	http2 := ""
	if opts.HTTP2 {
		// "http2 on" appeared in 1.25.1 and deprecated the listen flag;
		// older releases (Debian 12 ships 1.22) only know the listen flag.
		if versionAtLeast(s.version, 1, 25, 1) {
			http2 = "\n        http2 on;"
		} else {
			listen += " http2"
		}
	}
	user := ""
	if os.Geteuid() == 0 {
		// The default worker user (nobody) could not read the 0700
		// temporary directory.
		user = "user root;\n"
	}
	keepalive := opts.KeepaliveTimeout
	if keepalive <= 0 {
		keepalive = 60 * time.Second
	}
	var c strings.Builder
	fmt.Fprintf(&c, `# Generated by phalanx e2e/internal/nginxtest for one test; nginx %s.
daemon off;
master_process on;
worker_processes %d;
%spid %s;
lock_file %s;
error_log %s warn;
worker_shutdown_timeout 3s;

events {
    worker_connections 4096;
}

http {
    types {
        text/html html;
    }
    default_type application/octet-stream;
    server_tokens off;
    sendfile on;

    log_format phalanx '%s';
    access_log %s phalanx;

    client_body_temp_path %s;
    proxy_temp_path %s;
    fastcgi_temp_path %s;
    uwsgi_temp_path %s;
    scgi_temp_path %s;

    keepalive_requests 1000000;
    keepalive_timeout %dms;

    server {
        listen %s;%s
        server_name _;

        ssl_certificate %s;
        ssl_certificate_key %s;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 10m;
        ssl_session_tickets on;

        root %s;
%s
        location / {
            try_files /index.html =404;
        }
    }
}
`, s.version, opts.Workers, user, d("nginx.pid"), d("nginx.lock"), d("error.log"),
		LogFormat, d("access.log"),
		d("client_body_temp"), d("proxy_temp"), d("fastcgi_temp"), d("uwsgi_temp"), d("scgi_temp"),
		keepalive.Milliseconds(),
		listen, http2,
		d("tls/"+tlsgen.CertFileName), d("tls/"+tlsgen.KeyFileName), d("html"), opts.Server)
	return c.String()
}

// errAddrInUse marks a start attempt that failed because the port was taken.
var errAddrInUse = errors.New("port already in use")

// startOnce writes the config for port, starts nginx and waits until it
// completes a TLS handshake. On failure the process has exited.
func (s *Server) startOnce(port int, opts Options) error {
	if err := os.WriteFile(s.confPath, []byte(s.config(port, opts)), 0o644); err != nil {
		return fmt.Errorf("write nginx.conf: %w", err)
	}
	for _, f := range []string{s.errorLog, s.accessLog} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", f, err)
		}
	}
	stderr, err := os.OpenFile(s.stderrLog, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open nginx stderr file: %w", err)
	}
	defer stderr.Close() // the child keeps its own descriptor

	cmd := exec.Command(s.bin, "-p", s.dir+string(filepath.Separator), "-c", s.confPath, "-e", s.errorLog)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done, s.port = cmd, done, port
	go func() {
		s.waitErr = cmd.Wait()
		close(done)
	}()

	if err := s.waitReady(); err != nil {
		select {
		case <-done:
		default:
			_ = s.kill()
		}
		if strings.Contains(s.readErrorLog(), "Address already in use") {
			return fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return err
	}
	return nil
}

// waitReady polls with TLS handshakes until one verifies against the
// fixture's CA, the process exits, or StartTimeout passes.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(StartTimeout)
	cfg := &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}
	var lastErr error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("nginx exited during startup: %v", s.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", s.Addr())
		cancel()
		if err == nil {
			_ = conn.Close()
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("no TLS handshake with %s within %v: %w", s.Addr(), StartTimeout, lastErr)
		}
		select {
		case <-s.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts nginx down gracefully (SIGQUIT), waits up to StopTimeout for
// the master to exit, and otherwise kills the master and its workers
// (SIGKILL). It always waits for the master process. Stop is idempotent;
// Start's cleanup calls it. It returns an error if nginx had already exited
// on its own with a failure status, or had to be killed; the cleanup
// reports such an error as a test failure only if the test did not call Stop
// itself.
func (s *Server) Stop() error {
	s.stopCalled.Store(true)
	return s.stop()
}

func (s *Server) stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.stopErr = fmt.Errorf("nginx exited unexpectedly before stop: %w", s.waitErr)
			}
			return
		default:
		}
		if err := s.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			s.stopErr = fmt.Errorf("signal nginx to quit: %w", err)
		}
		select {
		case <-s.done:
			if s.waitErr != nil && s.stopErr == nil {
				s.stopErr = fmt.Errorf("nginx quit with failure: %w", s.waitErr)
			}
		case <-time.After(StopTimeout):
			_ = s.kill()
			s.stopErr = fmt.Errorf("nginx did not quit within %v of SIGQUIT; killed", StopTimeout)
		}
	})
	return s.stopErr
}

// kill SIGKILLs the master's children (the workers, which would otherwise
// outlive it holding the port) and the master, then waits for the master.
func (s *Server) kill() error {
	for _, pid := range childPIDs(s.cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err := s.cmd.Process.Kill()
	<-s.done
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill nginx: %w", err)
	}
	return nil
}

// childPIDs lists the direct children of pid from /proc (Linux); it returns
// nil where that is unavailable.
func childPIDs(pid int) []int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// WorkerPIDs returns the process ids of the master's current children, the
// nginx workers (Linux only; nil elsewhere). Workers start asynchronously,
// so right after Start fewer than Options.Workers may be listed.
func (s *Server) WorkerPIDs() []int { return childPIDs(s.cmd.Process.Pid) }

// PID returns the process id of the nginx master.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Version returns the nginx version in use, "MAJOR.MINOR.PATCH" (e.g.
// "1.22.1").
func (s *Server) Version() string { return s.version }

// Port returns the TCP port nginx listens on.
func (s *Server) Port() int { return s.port }

// Addr returns the listen address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns the base URL with a trailing slash, "https://127.0.0.1:PORT/".
// Every path under it serves the configured body.
func (s *Server) URL() string { return "https://" + s.Addr() + "/" }

// CAFile returns the path of the PEM file holding the CA certificate that
// clients must trust.
func (s *Server) CAFile() string { return s.caFile }

// CAPEM returns a copy of the CA certificate PEM that clients must trust.
func (s *Server) CAPEM() []byte { return bytes.Clone(s.caPEM) }

// ClientTLSConfig returns a new TLS client configuration that trusts the
// fixture's CA (TLS 1.2 minimum). The certificate covers 127.0.0.1 and
// localhost, among others.
func (s *Server) ClientTLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}
}

// Dir returns the prefix directory holding the configuration, logs and
// served files.
func (s *Server) Dir() string { return s.dir }

// ConfigPath returns the path of the generated nginx.conf.
func (s *Server) ConfigPath() string { return s.confPath }

// AccessLogPath returns the path of the access log (format LogFormat).
func (s *Server) AccessLogPath() string { return s.accessLog }

// ErrorLog returns the current content of nginx's error log (level warn and
// above), or a note if it cannot be read.
func (s *Server) ErrorLog() string { return s.readErrorLog() }

func (s *Server) readErrorLog() string {
	b, err := os.ReadFile(s.errorLog)
	if err != nil {
		return fmt.Sprintf("(error log unreadable: %v)", err)
	}
	return string(b)
}

// diagnostics returns the tails of the error log and nginx's stderr.
func (s *Server) diagnostics() string {
	tail := func(b []byte) string {
		const limit = 4096
		if len(b) > limit {
			b = b[len(b)-limit:]
		}
		return strings.TrimSpace(string(b))
	}
	errLog := tail([]byte(s.readErrorLog()))
	stderr, _ := os.ReadFile(s.stderrLog)
	return fmt.Sprintf("--- nginx error log (%s):\n%s\n--- nginx stderr:\n%s", s.errorLog, errLog, tail(stderr))
}

// AccessLog reads and parses the whole access log. nginx writes a line
// just after sending the response, so a client that has read a response
// may not see its line yet; use WaitLogStable to wait for it. Errors: the
// log cannot be read, or a line does not match LogFormat (with its number).
func (s *Server) AccessLog() ([]LogLine, error) {
	data, err := os.ReadFile(s.accessLog)
	if err != nil {
		return nil, fmt.Errorf("nginxtest: read access log: %w", err)
	}
	var lines []LogLine
	for i, raw := range strings.Split(string(data), "\n") {
		if raw == "" {
			continue // trailing newline, or a line being written
		}
		l, err := ParseLogLine(raw)
		if err != nil {
			return nil, fmt.Errorf("nginxtest: access log line %d: %w", i+1, err)
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// WaitLogStable polls the access log until its line count has not changed
// for quiet (DefaultLogQuiet if quiet <= 0), and returns the parsed lines.
// It fails the test if the log cannot be parsed or keeps changing for
// longer than LogWaitTimeout.
func (s *Server) WaitLogStable(t testing.TB, quiet time.Duration) []LogLine {
	t.Helper()
	if quiet <= 0 {
		quiet = DefaultLogQuiet
	}
	deadline := time.Now().Add(LogWaitTimeout)
	lines, err := s.AccessLog()
	if err != nil {
		t.Fatal(err)
	}
	lastChange := time.Now()
	for {
		if time.Since(lastChange) >= quiet {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginxtest: access log still changing after %v (%d lines)", LogWaitTimeout, len(lines))
		}
		time.Sleep(10 * time.Millisecond) // poll interval
		next, err := s.AccessLog()
		if err != nil {
			t.Fatal(err)
		}
		if len(next) != len(lines) {
			lastChange = time.Now()
		}
		lines = next
	}
}

// ParseLogLine parses one access-log line written in LogFormat. The URI may
// contain spaces (nginx does not escape them); every other field may not.
// Errors name the field that is missing or malformed.
func ParseLogLine(line string) (LogLine, error) {
	l := LogLine{Raw: line}
	line = strings.TrimRight(line, "\r\n")
	// Eight leading fields, then the URI, then the body size as the last field.
	head := make([]string, 8)
	rest := line
	for i := range head {
		var ok bool
		head[i], rest, ok = strings.Cut(rest, " ")
		if !ok || head[i] == "" {
			return LogLine{}, fmt.Errorf("parse %q: want 10 space-separated fields", line)
		}
	}
	cut := strings.LastIndexByte(rest, ' ')
	if cut < 1 {
		return LogLine{}, fmt.Errorf("parse %q: want 10 space-separated fields", line)
	}
	uri, bodyBytes := rest[:cut], rest[cut+1:]

	var err error
	num := func(name, v string) int64 {
		if err != nil || v == "-" {
			return 0
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			err = fmt.Errorf("parse %q: field %s: %w", line, name, perr)
		}
		return n
	}
	l.Connection = num("connection", head[0])
	l.ConnectionRequests = num("connection_requests", head[1])
	switch head[2] {
	case "r":
		l.SessionReused = true
	case ".", "-":
	default:
		return LogLine{}, fmt.Errorf("parse %q: field ssl_session_reused: unexpected %q", line, head[2])
	}
	l.Protocol = head[3]
	l.TLSProtocol = head[4]
	l.Status = int(num("status", head[5]))
	l.Method = head[6]
	l.RemoteAddr = head[7]
	l.URI = uri
	l.BodyBytes = num("body_bytes_sent", bodyBytes)
	if err != nil {
		return LogLine{}, err
	}
	return l, nil
}

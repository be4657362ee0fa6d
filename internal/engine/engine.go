package engine

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
)

// Version is sent in the User-Agent header ("phalanx/" + Version).
var Version = "dev"

// Config configures an Engine.
type Config struct {
	// Share is this engine's part of the plan. Share.Plan must be valid.
	Share plan.Share
	// Workers is the number of workers (recorders); connections are dealt
	// round-robin to them. Default runtime.GOMAXPROCS(0).
	Workers int
	// Clock is the engine's wall clock (the agent's). Default time.Now.
	// Only its wall reading is used to place the start instant; all
	// intervals are measured with the monotonic clock of time.Now.
	Clock func() time.Time
	// Logger receives connection-level diagnostics. Default slog.Default().
	Logger *slog.Logger
	// DialTimeout bounds one TCP connect plus TLS handshake. Default the
	// plan's timeout.
	DialTimeout time.Duration
}

// Engine runs one share. It is used once: Prepare, then Run, then Close.
type Engine struct {
	cfg     Config
	plan    plan.Plan
	target  plan.Target
	addr    string // resolved host:port, dialled by every connection
	tlsConf *tls.Config
	request []byte // the serialized request, written as is
	head    bool

	workers []*recorder
	conns   []*conn

	firstSend atomic.Int64 // unix nanos (engine clock) of the first send; 0 = none

	stopOnce sync.Once
	stopped  chan struct{}
	stopCtx  context.Context // canceled by stop; bounds reconnects
	cancel   context.CancelFunc
}

// New validates cfg, builds the request and TLS configuration and resolves
// the target's name once (never again per connection). It opens no
// connection.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	p := cfg.Share.Plan
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if cfg.Share.Connections < 1 {
		return nil, fmt.Errorf("share has %d connections: want at least 1", cfg.Share.Connections)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Workers > cfg.Share.Connections {
		cfg.Workers = cfg.Share.Connections
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = p.Timeout
	}
	t, err := plan.ParseTarget(p.URL)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", p.URL, err)
	}
	e := &Engine{cfg: cfg, plan: p, target: t, stopped: make(chan struct{})}
	e.stopCtx, e.cancel = context.WithCancel(context.Background())
	e.request, e.head = buildRequest(p, t)
	if t.TLS {
		if e.tlsConf, err = tlsConfig(p, t); err != nil {
			return nil, err
		}
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, t.Host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", t.Host, err)
	}
	e.addr = net.JoinHostPort(addrs[0], t.Port)
	for range cfg.Workers {
		e.workers = append(e.workers, newRecorder())
	}
	for i := range cfg.Share.Connections {
		e.conns = append(e.conns, &conn{e: e, rec: e.workers[i%cfg.Workers]})
	}
	return e, nil
}

// Addr returns the resolved address the engine dials.
func (e *Engine) Addr() string { return e.addr }

func tlsConfig(p plan.Plan, t plan.Target) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
		InsecureSkipVerify: p.TLS.Insecure, //nolint:gosec // the user asked for it
		ServerName:         t.Host,         // crypto/tls sends no SNI for IP literals (RFC 6066)
	}
	if p.TLS.ServerName != "" {
		c.ServerName = p.TLS.ServerName
	}
	if len(p.TLS.CAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(p.TLS.CAPEM) {
			return nil, errors.New("tls: CA bundle holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	return c, nil
}

// buildRequest serializes the plan's request once.
func buildRequest(p plan.Plan, t plan.Target) ([]byte, bool) {
	b := make([]byte, 0, 256+len(p.Body))
	b = append(b, p.Method...)
	b = append(b, ' ')
	b = append(b, t.RequestURI...)
	b = append(b, " HTTP/1.1\r\n"...)
	hasHost, hasUA := false, false
	for _, h := range p.Headers {
		switch {
		case equalFold(h.Name, "host"):
			hasHost = true
		case equalFold(h.Name, "user-agent"):
			hasUA = true
		case equalFold(h.Name, "content-length"):
			continue // set from the body below
		}
	}
	if !hasHost {
		b = append(b, "Host: "...)
		b = append(b, t.HostHeader...)
		b = append(b, "\r\n"...)
	}
	if !hasUA {
		b = append(b, "User-Agent: phalanx/"...)
		b = append(b, Version...)
		b = append(b, "\r\n"...)
	}
	for _, h := range p.Headers {
		if equalFold(h.Name, "content-length") {
			continue
		}
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	if len(p.Body) > 0 || p.Method == "POST" || p.Method == "PUT" || p.Method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(p.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, p.Body...)
	return b, p.Method == "HEAD"
}

func equalFold(a, lower string) bool { return asciiEqualFold([]byte(a), lower) }

// Prepared reports what Prepare opened.
type Prepared struct {
	// Connections is the number of connections open and handshaken.
	Connections int
	// Errors counts connections that failed to open, by kind name.
	Errors map[string]int64
	// FirstError is one of the failures, for the log and the user.
	FirstError error
}

// Prepare opens and handshakes every connection, at most 64 at a time. It
// fails only when no connection could be opened (the target is
// unreachable); connections that failed are retried when the run starts.
func (e *Engine) Prepare(ctx context.Context) (Prepared, error) {
	var (
		mu  sync.Mutex
		res = Prepared{Errors: map[string]int64{}}
		wg  sync.WaitGroup
		sem = make(chan struct{}, 64)
	)
	for _, c := range e.conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := c.dial(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Errors[err.kind.String()]++
				if res.FirstError == nil {
					res.FirstError = err
				}
				return
			}
			res.Connections++
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.Connections == 0 {
		return res, fmt.Errorf("open connections to %s (%s): %w", e.plan.URL, e.addr, res.FirstError)
	}
	return res, nil
}

// Interval is one reporting interval's measurements.
type Interval struct {
	// Index is k: the interval covers [Start, End) = [start+k·i, start+(k+1)·i),
	// the last one cut at the window's end.
	Index int
	// Start and End bound the interval (engine clock).
	Start, End time.Time
	// Latency holds the latencies of requests that completed in the
	// interval, in µs.
	Latency *hist.Histogram
	// Counts are the outcomes that ended in the interval.
	Counts Counts
}

// Result is what Run reports once the window has closed and in-flight
// requests have drained.
type Result struct {
	// FirstSend is when the first request was written (engine clock); zero
	// when none was.
	FirstSend time.Time
	// Issued counts requests issued in the window.
	Issued int64
	// InFlight counts requests issued in the window that had not ended when
	// it closed (they drained afterwards, or were abandoned).
	InFlight int64
}

// Run starts every connection at startAt (engine clock), runs for the plan's
// duration and calls emit once per interval, in order, from one goroutine
// (emit must not block for long). It returns after the window closes and
// in-flight requests drain (bounded by the plan's timeout), or when ctx
// ends, in which case every connection is closed at once and Run returns
// ctx's error.
func (e *Engine) Run(ctx context.Context, startAt time.Time, emit func(Interval)) (Result, error) {
	wait := startAt.Sub(e.cfg.Clock())
	mono := time.Now().Add(wait) // start instant on the monotonic clock
	windowEnd := mono.Add(e.plan.Duration)
	interval := e.plan.Interval

	stopCloser := context.AfterFunc(ctx, e.stop)
	defer stopCloser()

	go_ := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range e.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.loop(go_, mono, windowEnd, interval)
		}()
	}
	// Sleep to just before the instant, then spin, so that every agent's
	// first sends leave within microseconds of it.
	if !sleepUntil(ctx, mono.Add(-2*time.Millisecond)) {
		close(go_)
		e.stop()
		wg.Wait()
		return Result{}, ctx.Err()
	}
	for time.Now().Before(mono) {
	}
	close(go_)

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	spare := newSlot()
	nIntervals := int((e.plan.Duration + interval - 1) / interval)
	for k := range nIntervals {
		end := mono.Add(time.Duration(k+1) * interval)
		last := k == nIntervals-1
		if last {
			end = windowEnd
			// The last interval is emitted once every connection has
			// finished, so no in-window sample is missed.
			select {
			case <-done:
			case <-ctx.Done():
			}
		} else if !sleepUntil(ctx, end.Add(2*time.Millisecond)) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		iv := Interval{
			Index:   k,
			Start:   startAt.Add(time.Duration(k) * interval),
			End:     startAt.Add(end.Sub(mono)),
			Latency: hist.New(),
		}
		for _, w := range e.workers {
			s := w.swap(spare)
			if err := iv.Latency.Merge(s.hist); err != nil {
				e.cfg.Logger.Error("merge interval", "err", err)
			}
			iv.Counts.Add(&s.counts)
			s.reset()
			spare = s
		}
		emit(iv)
	}
	<-done
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var res Result
	for _, c := range e.conns {
		res.Issued += c.issued
		res.InFlight += c.inFlight
	}
	if fs := e.firstSend.Load(); fs != 0 {
		res.FirstSend = time.Unix(0, fs)
	}
	return res, nil
}

// Close closes every connection. It is safe to call more than once and
// concurrently with Run.
func (e *Engine) Close() { e.stop() }

func (e *Engine) stop() {
	e.stopOnce.Do(func() {
		close(e.stopped)
		e.cancel()
		for _, c := range e.conns {
			c.close()
		}
	})
}

// sleepUntil sleeps until t (monotonic) or ctx ends; it reports whether t
// was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// conn is one connection slot: a goroutine that keeps one connection open
// (reopening it after errors and closes) and sends requests in closed loop.
type conn struct {
	e   *Engine
	rec *recorder

	mu     sync.Mutex // guards nc and closed against stop()
	nc     net.Conn
	br     *bufio.Reader
	closed bool

	// Owned by the conn's goroutine; read by Run after it exits.
	issued   int64
	inFlight int64
	resp     response
}

// dialError is a failed connect or handshake.
type dialError struct {
	kind ErrorKind
	err  error
}

func (d *dialError) Error() string { return d.err.Error() }
func (d *dialError) Unwrap() error { return d.err }

// dial opens a new connection and makes it current.
func (c *conn) dial(ctx context.Context) (net.Conn, *dialError) {
	e := c.e
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return nil, &dialError{classifyDial(err, false), fmt.Errorf("connect %s: %w", e.addr, err)}
	}
	nc := raw
	if e.tlsConf != nil {
		tc := tls.Client(raw, e.tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &dialError{classifyDial(err, true), fmt.Errorf("tls handshake with %s: %w", e.addr, err)}
		}
		nc = tc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return nil, &dialError{ErrLocal, net.ErrClosed}
	}
	c.nc = nc
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 16<<10)
	} else {
		c.br.Reset(nc)
	}
	return nc, nil
}

// drop closes the current connection after an error or a server close.
func (c *conn) drop() {
	c.mu.Lock()
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
	c.mu.Unlock()
}

func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	if c.nc != nil {
		c.nc.Close()
	}
	c.mu.Unlock()
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// loop sends requests in closed loop from start until windowEnd. A request
// that ends after windowEnd counts as in flight; none is issued after it.
func (c *conn) loop(start <-chan struct{}, mono, windowEnd time.Time, interval time.Duration) {
	e := c.e
	<-start
	defer c.drop()
	timeout := e.plan.Timeout
	first := true
	for {
		select {
		case <-e.stopped:
			return
		default:
		}
		t0 := time.Now()
		if !t0.Before(windowEnd) {
			return
		}
		c.issued++
		if first {
			first = false
			e.firstSend.CompareAndSwap(0, e.cfg.Clock().Add(t0.Sub(time.Now())).UnixNano())
		}
		status, kind, failed := c.do(t0, timeout)
		t1 := time.Now()
		if !t1.Before(windowEnd) {
			c.inFlight++ // ended after the window closed: drained
			return
		}
		k := int(t1.Sub(mono) / interval)
		r := c.rec
		r.mu.Lock()
		s := r.slotFor(k)
		if failed {
			s.counts.Errors[kind]++
		} else {
			s.hist.Record(t1.Sub(t0))
			s.counts.Requests++
			s.counts.BytesRead += c.resp.wireBytes
			s.counts.Status[status]++
		}
		r.mu.Unlock()
	}
}

// do performs one request on the current connection, opening one first if
// needed. It returns the final status, or the error kind when failed.
func (c *conn) do(t0 time.Time, timeout time.Duration) (status int, kind ErrorKind, failed bool) {
	e := c.e
	c.mu.Lock()
	nc := c.nc
	c.mu.Unlock()
	if nc == nil {
		var derr *dialError
		if nc, derr = c.dial(e.stopCtx); derr != nil {
			return 0, derr.kind, true
		}
	}
	_ = nc.SetDeadline(t0.Add(timeout))
	if _, err := nc.Write(e.request); err != nil {
		c.drop()
		return 0, classify(err, false), true
	}
	started := false
	if err := readResponse(c.br, e.head, &c.resp, &started); err != nil {
		c.drop()
		return 0, classify(err, started), true
	}
	if c.resp.status >= maxStatus {
		c.drop()
		return 0, ErrProtocol, true
	}
	if c.resp.close {
		c.drop()
	}
	return c.resp.status, 0, false
}

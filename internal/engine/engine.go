package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/version"
)

// Version is sent in the User-Agent header ("phalanx/" + Version): the
// build's version.Version.
var Version = version.Version

// Config configures an Engine.
type Config struct {
	// Share is this engine's part of the plan. Share.Plan must be valid.
	Share plan.Share
	// Workers is the number of workers; connections are dealt round-robin
	// to them, and each worker owns a recorder, a TLS session cache and a
	// part of the request count. Default runtime.GOMAXPROCS(0).
	Workers int
	// Clock is the engine's wall clock (the agent's). Default time.Now.
	// Only its wall reading is used to place the start instant; all
	// intervals are measured with the monotonic clock of time.Now.
	Clock func() time.Time
	// Logger receives connection-level diagnostics. Default slog.Default().
	Logger *slog.Logger
	// Allow, when not nil, is the agent's target allowlist: New refuses a
	// share it does not admit, before any packet goes to the target, with
	// an *allow.RefusedError. Checked: the plan's resolver (before it is
	// asked anything) and the address every connection will dial, as
	// resolved (--connect-to's, else the URL's host; a mix's URLs share
	// the URL's host and port, plan.Check). That address is resolved once
	// and pinned: every connection and reconnection of the run dials it,
	// none resolves again. Nil checks nothing (tests, benchmarks); the
	// agent always sets it.
	Allow *allow.List
	// LookupHost resolves a host name to addresses, for tests. Default
	// (nil): the plan's resolver, else the system's.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// Pacing is how open-loop slots wait for their intended send times.
	// Default (zero) PacingPrecise, or PacingSlotTimerfdSpin when the
	// plan asks for the spin (plan.Plan.PacingSpin); the others are kept
	// to be measured against them (BenchmarkOpenLoopLateness).
	Pacing Pacing
}

// Engine runs one share. It is used once: Prepare, then Run, then Close.
type Engine struct {
	cfg     Config
	plan    plan.Plan
	target  plan.Target
	addr    string    // resolved host:port, dialled by every connection
	h3      *h3Shared // HTTP/3's socket address and configurations (plan.H3)
	entries []entry
	sched   []uint16 // weighted round-robin order of entries

	workers []*worker
	pacer   pacer // the load model: when each slot sends
	// poller is pacer when it can tell without waiting whether a slot
	// may send now (closed loop), else nil: HTTP/2 read loops then chain
	// requests (h2chain.go).
	poller pollPacer
	// alarmFds is how many more timerfds PacingSlotTimerfd's clocks may
	// make (spareFds).
	alarmFds atomic.Int64
	newSlot  func(e *Engine, w *worker, i, j int) connSlot
	connsMu  sync.Mutex     // guards slots (open loop adds slots while running)
	slots    []connSlot     // every connection slot, in creation order
	wg       sync.WaitGroup // slot goroutines

	// noIdleLook turns the idle look off (tests leave stale connections
	// to the resend alone).
	noIdleLook bool

	// Set by Run before any connection goroutine starts.
	mono        time.Time // start instant (monotonic)
	windowStart time.Time // mono + warmup
	windowEnd   time.Time // windowStart + duration; zero time: no limit
	interval    time.Duration

	// firstSend is 1 + the offset (ns) from the start instant of the
	// earliest actual send; 0 = none yet.
	firstSend atomic.Int64
	// rt holds the threads woken at an instant at real-time priority
	// until a send after it ends (noteSend).
	rt rtHold
	// stageStarts are the stages' start offsets from the start instant;
	// stageLate[i] is 1 + the lateness (ns) of the first open-loop send
	// scheduled at or after stage i's start (0: none yet).
	stageStarts []time.Duration
	stageLate   []atomic.Int64
	maxStreams  atomic.Int32 // effective HTTP/2 streams per connection (min seen)

	stopOnce sync.Once
	stopped  chan struct{}
	stopCtx  context.Context // canceled by stop; bounds dials
	cancel   context.CancelFunc

	// Ending the window early (EndWindow). endedAt (monotonic) is written
	// once, before ended is set; read it only after ended.Load() is true.
	endOnce sync.Once
	endCh   chan struct{} // closed by EndWindow: wakes waiting slots
	ended   atomic.Bool
	endedAt time.Time
	// aborted counts open-loop tickets taken but given back unsent because
	// the window was ended: with them, a count that ran out was not done.
	aborted atomic.Int64
}

// worker owns a recorder, a TLS configuration (with its own session cache)
// and, in count mode, a part of the request budget.
type worker struct {
	idx      int
	rec      *recorder
	tlsConf  *tls.Config
	sources  []net.Addr   // Plan.SourceIPs, bound round-robin (none: the kernel's choice)
	source   atomic.Int64 // the next source's index
	resume   *resumeMix   // with Plan.TLS.Resume: the session cache and the offer mix
	budget   atomic.Int64 // requests left in count mode
	counting bool
	ended    *atomic.Bool // the engine's: set by EndWindow
	// Count mode's mix positions: first is the global index (over the
	// plan's agents and workers) of the worker's first request, seq the
	// worker's requests picked so far (countEntry).
	first int64
	seq   atomic.Int64

	// Pacing. open: the schedule is the worker's rate and connections
	// take numbered tickets from it; closed: it is the worker's number of
	// active connections.
	open     bool
	sched    schedule
	phase    float64      // fraction of a ticket: spreads workers' sends
	ticket   atomic.Int64 // next ticket (open loop)
	clock    sendClock    // what slots wait on for their tickets' times (open loop)
	taken    atomic.Int64 // tickets taken whose intended time is before the window's end
	conns    atomic.Int64 // connection slots (open loop grows it)
	maxConns int64        // cap for growth (open loop)
}

// take claims one request from the budget; always true outside count mode,
// false once the window was ended (EndWindow), without touching the budget.
func (w *worker) take() bool {
	if w.ended.Load() {
		return false
	}
	return !w.counting || w.budget.Add(-1) >= 0
}

// New validates cfg, builds the requests and TLS configurations, checks the
// file descriptor limit, and resolves the target's name once (never again
// per connection). It opens no connection.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	p := cfg.Share.Plan
	parsed, err := p.Check()
	if err != nil {
		return nil, err
	}
	t := parsed.Target
	if cfg.Share.Connections < 1 {
		return nil, fmt.Errorf("share has %d connections: want at least 1", cfg.Share.Connections)
	}
	if (p.Requests > 0) != (cfg.Share.Requests > 0) || cfg.Share.Requests > p.Requests {
		return nil, fmt.Errorf("share has %d of the plan's %d requests: count mode needs a positive part", cfg.Share.Requests, p.Requests)
	}
	if len(cfg.Share.StageTargets) != len(p.Stages) {
		return nil, fmt.Errorf("share has %d stage targets for the plan's %d stages", len(cfg.Share.StageTargets), len(p.Stages))
	}
	for i, t := range cfg.Share.StageTargets {
		if t < 0 || t > p.StageTarget(i) {
			return nil, fmt.Errorf("share's stage %d target %d: want 0 to the plan's %d", i, t, p.StageTarget(i))
		}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	cfg.Workers = min(cfg.Workers, cfg.Share.Connections)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pacing == PacingPrecise && p.PacingSpin {
		cfg.Pacing = PacingSlotTimerfdSpin // the plan's --pacing-spin
	}
	e := &Engine{cfg: cfg, plan: p, target: t, stopped: make(chan struct{}), endCh: make(chan struct{})}
	e.pacer = newPacer(e, p.Load)
	e.poller, _ = e.pacer.(pollPacer)
	e.newSlot = newSlotFunc(p.Protocol)
	e.stopCtx, e.cancel = context.WithCancel(context.Background())
	if e.entries, e.sched, err = buildEntries(p, parsed.Entries); err != nil {
		return nil, err
	}
	if e.addr, err = resolve(ctx, p, t, cfg.Allow, cfg.LookupHost); err != nil {
		return nil, err
	}
	if p.Protocol == plan.H3 {
		if e.h3, err = newH3Shared(e.addr, p.Timeout); err != nil {
			return nil, err
		}
	}
	sources, err := sourceAddrs(p.SourceIPs, e.addr)
	if err != nil {
		return nil, err
	}
	var base *tls.Config
	if t.TLS {
		if base, err = tlsConfig(p, t); err != nil {
			return nil, err
		}
	}
	budgets := plan.Split(int(cfg.Share.Requests), cfg.Workers)
	first := int64(0) // the share's first request in the whole count
	for a := range cfg.Share.Index {
		first += int64(plan.Part(int(p.Requests), cfg.Share.Count, a))
	}
	open := p.OpenLoop()
	slots := cfg.Share.Connections
	if !open {
		for _, t := range cfg.Share.StageTargets {
			slots = max(slots, int(t))
		}
	}
	// Every slot, and in open loop every connection growth may add, needs
	// a descriptor: refuse before allocating slots for them.
	conns := max(slots, cfg.Share.MaxConnections)
	if err := checkFileLimit(conns); err != nil {
		return nil, err
	}
	if open && cfg.Pacing.slotFds() {
		// A timerfd per slot goroutine (one per stream slot in HTTP/2)
		// and, for HTTP/2 with keep-alive, per session pacer
		// (h2pacer.go), in what the limit leaves beyond the connections.
		want := conns * max(p.MaxStreams, 1)
		if p.Protocol == plan.H2 && !p.NoKeepAlive {
			want += conns
		}
		e.alarmFds.Store(spareFds(conns, want))
	}
	for i := range cfg.Workers {
		w := &worker{idx: i, rec: newRecorder(len(e.entries)), counting: cfg.Share.Requests > 0, open: open, ended: &e.ended}
		w.budget.Store(int64(budgets[i]))
		w.first = first
		first += int64(budgets[i])
		first := float64(plan.Part(cfg.Share.Connections, cfg.Workers, i))
		if open {
			first = float64(plan.Part(int(cfg.Share.Rate), cfg.Workers, i))
			w.phase = (float64(i) + 0.5) / float64(cfg.Workers)
			w.maxConns = int64(plan.Part(max(cfg.Share.MaxConnections, cfg.Share.Connections), cfg.Workers, i))
		}
		var targets []float64
		for _, t := range cfg.Share.StageTargets {
			targets = append(targets, float64(plan.Part(int(t), cfg.Workers, i)))
		}
		w.sched = newSchedule(p, first, targets)
		if open {
			w.clock = newSendClock(cfg.Pacing, e.stopped, e.endCh, &e.alarmFds)
		}
		w.sources = sources
		if base != nil {
			w.tlsConf = base.Clone()
			if p.TLS.Resume {
				w.resume = newResumeMix(base, p.TLS.ResumeRatio)
				w.resume.copies = p.Protocol == plan.H3
			}
		}
		e.workers = append(e.workers, w)
	}
	e.maxStreams.Store(int32(p.MaxStreams))
	for _, sp := range p.StageSpans() {
		e.stageStarts = append(e.stageStarts, p.Warmup+sp.Start)
	}
	e.stageLate = make([]atomic.Int64, len(e.stageStarts))
	for i := range slots {
		w := e.workers[i%cfg.Workers]
		j := int(w.conns.Add(1) - 1) // the slot's index within its worker
		e.slots = append(e.slots, e.newSlot(e, w, i, j))
	}
	return e, nil
}

// Addr returns the address every connection dials, host:port, as
// resolved (and admitted by Config.Allow) in New.
func (e *Engine) Addr() string { return e.addr }

// countEntry returns, in count mode, the mix entry of worker w's next
// request: the one at the request's global index in the mix's weighted
// round-robin order (e.sched), so that the plan's N requests, summed over
// agents and workers, hold each entry exactly as often as the order's first
// N positions do (exact proportions when N is a multiple of the weights'
// sum). Called once per request taken from the budget.
func (e *Engine) countEntry(w *worker) *entry {
	i := w.first + w.seq.Add(1) - 1
	return &e.entries[e.sched[i%int64(len(e.sched))]]
}

// giveBack returns an open-loop ticket that worker w took but did not send
// because the window was ended (or the engine stopped) while it waited for
// its intended time, and returns next's "done" result. The ticket then
// counts neither as taken (countUnsent) nor, in count mode, as the end of
// the count.
func (e *Engine) giveBack(w *worker) (time.Time, bool) {
	if e.ended.Load() {
		w.taken.Add(-1)
		e.aborted.Add(1)
	}
	return time.Time{}, false
}

// firstOfPhase reports whether ticket k (at offset off) is worker w's first
// of the run or of a stage.
func (e *Engine) firstOfPhase(w *worker, k int64, off time.Duration) bool {
	if k == 0 {
		return true
	}
	for _, st := range e.stageStarts[min(1, len(e.stageStarts)):] {
		if off >= st {
			prev, ok := w.sched.at(float64(k-1) + w.phase)
			if ok && prev < st {
				return true
			}
		}
	}
	return false
}

// wait sleeps d on timer, or until the engine stops or the window is
// ended by EndWindow (false).
func (e *Engine) wait(timer *time.Timer, d time.Duration) bool {
	return waitTimer(timer, d, e.stopped, e.endCh)
}

// resolve returns the address every connection dials: connect-to's, or the
// URL's host, resolved once (with the plan's resolver if set, or lookup),
// and admitted by list when list is not nil: the first resolved address it
// admits. The plan's resolver is checked against list before it is asked.
func resolve(ctx context.Context, p plan.Plan, t plan.Target, list *allow.List, lookup func(context.Context, string) ([]string, error)) (string, error) {
	host, port := t.Host, t.Port
	if p.ConnectTo != "" {
		host, port, _ = net.SplitHostPort(p.ConnectTo)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if lookup == nil {
		r := net.DefaultResolver
		if p.Resolver != "" {
			server, err := resolveResolver(ctx, p.Resolver, list)
			if err != nil {
				return "", err
			}
			r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, server)
			}}
		}
		lookup = r.LookupHost
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		var err error
		if addrs, err = lookup(ctx, host); err != nil {
			return "", fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return "", fmt.Errorf("resolve %s: no address", host)
		}
	}
	addr, err := admit(list, host, port, addrs)
	if err != nil && p.ConnectTo != "" {
		return "", fmt.Errorf("connect_to %s: %w", p.ConnectTo, err)
	}
	return addr, err
}

// resolveResolver returns the plan's DNS server as an address list
// admits: its host resolved by the system resolver when it is a name.
func resolveResolver(ctx context.Context, hostPort string, list *allow.List) (string, error) {
	host, port, _ := net.SplitHostPort(hostPort)
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		var err error
		if addrs, err = net.DefaultResolver.LookupHost(ctx, host); err != nil {
			return "", fmt.Errorf("resolve the resolver %s: %w", host, err)
		}
	}
	addr, err := admit(list, host, port, addrs)
	if err != nil {
		return "", fmt.Errorf("resolver: %w", err)
	}
	return addr, nil
}

// admit returns the first of addrs (resolved from host) that list admits
// with port, as host:port; with a nil list, the first. Errors: the
// refusal of the first address, naming every address when there were
// several.
func admit(list *allow.List, host, port string, addrs []string) (string, error) {
	if list == nil {
		return net.JoinHostPort(addrs[0], port), nil
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("port %q: %w", port, err)
	}
	var first error
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return "", fmt.Errorf("resolve %s: address %q: %w", host, a, err)
		}
		ap := netip.AddrPortFrom(ip.WithZone(""), uint16(pn))
		err = list.Check(host, ap)
		if err == nil {
			return ap.String(), nil
		}
		if first == nil {
			first = err
		}
	}
	if len(addrs) > 1 {
		return "", fmt.Errorf("%w (%s resolved to %s, none admitted)", first, host, strings.Join(addrs, ", "))
	}
	return "", first
}

// checkFileLimit makes sure the process may open a descriptor per
// connection plus headroom, raising the soft limit up to the hard one.
func checkFileLimit(conns int) error {
	need := uint64(conns) + 256
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // cannot tell: let dials report local errors
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max >= need {
		lim.Cur = need
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%d connections need about %d file descriptors, the limit is %d (hard %d): raise ulimit -n or use fewer connections per agent", conns, need, lim.Cur, lim.Max)
}

// spareFds raises the descriptor limit, up to the hard one, so that want
// more descriptors fit beside conns connections and checkFileLimit's
// headroom, and returns how many of want fit (0 when the limit cannot be
// read).
func spareFds(conns, want int) int64 {
	need := uint64(conns) + 256
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < need+uint64(want) && lim.Max > lim.Cur {
		cur := lim.Cur
		lim.Cur = min(need+uint64(want), lim.Max)
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
			lim.Cur = cur
		}
	}
	if lim.Cur <= need {
		return 0
	}
	return int64(min(uint64(want), lim.Cur-need))
}

// Prepared reports what Prepare opened.
type Prepared struct {
	// Connections is the number of connections open and handshaken.
	Connections int
	// Errors counts connections that failed to open, by kind name.
	Errors map[string]int64
	// FirstError is one of the failures, for the log and the user.
	FirstError error
}

// Prepare opens and handshakes every connection, at most 64 at a time, and
// records them in the first interval (or the warm-up); with a connection
// rate (Plan.ConnectionRate) it opens none. It fails only when no
// connection could be opened (the target is unreachable); connections that
// failed are retried when the run starts.
func (e *Engine) Prepare(ctx context.Context) (Prepared, error) {
	var (
		mu  sync.Mutex
		res = Prepared{Errors: map[string]int64{}}
		wg  sync.WaitGroup
		sem = make(chan struct{}, 64)
	)
	if e.plan.ConnectionRate {
		return res, nil // every connection opens at its ticket's time
	}
	// Prepared connections are recorded in the window's first interval
	// even after a warm-up: the run's connection and handshake figures
	// include them, and without a reconnect they are the only ones.
	const k = 0
	open := func(w *worker, dial func() (*connInfo, *dialError)) {
		defer wg.Done()
		defer func() { <-sem }()
		ci, err := dial()
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
		w.rec.mu.Lock()
		w.rec.recordConn(k, ci)
		w.rec.mu.Unlock()
	}
	for _, c := range e.slots {
		wg.Add(1)
		sem <- struct{}{}
		go open(c.worker(), func() (*connInfo, *dialError) { return c.dial(ctx, false) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.Connections == 0 && unreachable(res.FirstError) {
		return res, fmt.Errorf("open connections to %s (%s): %w", e.plan.URL, e.addr, res.FirstError)
	}
	return res, nil
}

// unreachable reports whether a failed open means the run cannot start:
// nothing answers at the address, a client-side limit, or a certificate
// that does not verify. A server that answers and then misbehaves (resets,
// closes during the handshake) is measured instead: the run goes on and
// reports its errors by kind.
func unreachable(err error) bool {
	var de *dialError
	if !errors.As(err, &de) {
		return true
	}
	switch de.kind {
	case measure.ErrConnect, measure.ErrLocal, measure.ErrPorts:
		return true
	}
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	if errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) || errors.As(err, &ve) {
		return true
	}
	// A TLS alert in the handshake, sent by the server (crypto/tls reports
	// it as a "remote error" OpError) or by us (an AlertError): the two
	// sides cannot agree on a version, cipher suite or group, so every
	// connection would fail the same way.
	var alert tls.AlertError
	var op *net.OpError
	return de.kind == measure.ErrTLS && (errors.As(err, &alert) || errors.As(err, &op) && op.Op == "remote error")
}

// Interval is one reporting interval's measurements.
type Interval struct {
	// Index is k: the interval covers [Start, End) = [w+k·i, w+(k+1)·i)
	// where w is the window's start; the last one ends with the window.
	Index int
	// Start and End bound the interval (engine clock).
	Start, End time.Time
	// Hists are the interval's histograms. They are reused: valid only
	// until emit returns.
	Hists *hist.Set
	// Counts are the outcomes that ended in the interval (Issued is 0:
	// see measure.Counts).
	Counts measure.Counts
	// FirstSend is the earliest request write so far (engine clock, as
	// Result.FirstSend); zero when none yet.
	FirstSend time.Time
}

// Result is what Run reports once the window has closed and in-flight
// requests have drained.
type Result struct {
	// FirstSend is when the first request was written (engine clock); zero
	// when none was.
	FirstSend time.Time
	// WindowEnd is when the window closed (engine clock): the planned end,
	// or the last request's end when the count ran out first.
	WindowEnd time.Time
	// Issued counts requests issued in the window, plus those issued in
	// the warm-up that ended in the window.
	Issued int64
	// InFlight counts requests that had not ended when the window closed
	// (they drained afterwards, or were abandoned).
	InFlight int64
	// Warmup counts the outcomes that ended in the warm-up.
	Warmup measure.Counts
	// MaxStreams is the effective concurrent streams per HTTP/2
	// connection: the plan's, capped by the server's setting.
	MaxStreams int
	// StageChanges has one entry per stage after the first: the stage's
	// start (engine clock) plus the lateness of the first send scheduled
	// in it (open loop) or of the first send of a connection slot the
	// stage activated (closed loop, a rising connection target); zero time
	// when there was none.
	StageChanges []time.Time
	// Mix has one entry per request of the plan's mix, in mix order, each
	// measured apart over the window, when the mix has 2 to
	// MaxMixReported requests; nil otherwise.
	Mix []MixResult
	// StoppedEarly is set when EndWindow ended the window before its
	// planned end (or before the count ran out). WindowEnd is then the
	// last in-window request's end, as in count mode (the window's start
	// when none ended in it), and InFlight counts only requests still open
	// at the planned end. False when EndWindow came too late to shorten
	// anything.
	StoppedEarly bool
}

// Run starts every connection at startAt (engine clock), runs the warm-up
// and the window, and calls emit once per window interval, in order, from
// one goroutine (emit must not block for long, and must not keep the
// interval's histograms: they are reused). It returns after the window
// closes (at its planned end, or when the request count runs out) and
// in-flight requests drain (bounded by the plan's timeout), or when ctx
// ends, in which case every connection is closed at once and Run returns
// ctx's error. EndWindow closes the window early: Run then returns as in
// count mode, with Result.StoppedEarly set.
func (e *Engine) Run(ctx context.Context, startAt time.Time, emit func(Interval)) (Result, error) {
	wait := startAt.Sub(e.cfg.Clock())
	e.mono = time.Now().Add(wait) // start instant on the monotonic clock
	e.windowStart = e.mono.Add(e.plan.Warmup)
	if e.plan.Duration > 0 {
		e.windowEnd = e.windowStart.Add(e.plan.Duration)
	}
	e.interval = e.plan.Interval
	windowStartWall := startAt.Add(e.plan.Warmup)

	stopCloser := context.AfterFunc(ctx, e.stop)
	defer stopCloser()

	// Allocated before the start, not in its first microseconds.
	spare := newSlot()
	ivHists := hist.NewSet() // reused: an Interval's Hists are valid only during emit

	// Collect the preparation's garbage now, in the lead time (before a
	// closed loop's first slot waits for the start), rather than in a
	// cycle that begins at the start.
	if time.Until(e.mono) > 20*time.Millisecond {
		runtime.GC()
	}

	// In open loop every slot is released before the instant: each
	// worker's first ticket waits for it at the instant's precision and is
	// sent from the woken thread (openPacer). In closed loop the first
	// slot's goroutine waits for the instant (startWait), releases the
	// others and goes straight on to its own first request, on the woken
	// thread. A waiter that only released the slots left the first send to
	// the scheduler, which ran whatever had become runnable during the wait
	// (timers, the agent's other goroutines) first: the first send left
	// 261-370 µs after the instant in 3 of 20 runs with a busy loop on
	// each agent's CPU (bench/skew.sh).
	open := e.plan.OpenLoop()
	release := make(chan struct{})
	wg := &e.wg
	for i, c := range e.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 && !open {
				e.startWait()
				close(release)
			} else {
				<-release
			}
			c.loop()
		}()
	}
	for _, w := range e.workers {
		// The watcher grows the connections, and counts growth refused at
		// the cap: where growth may add one, and for every connection
		// rate (its cap is --max-open's, whatever -c).
		if w.open && (w.maxConns > w.conns.Load() || e.plan.ConnectionRate) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				e.watch(w)
			}()
		}
	}
	var clocksStop []func()
	for _, w := range e.workers {
		if w.clock != nil {
			clocksStop = append(clocksStop, w.clock.start())
		}
	}
	stopClocks := func() { // once every slot has exited
		for _, stop := range clocksStop {
			stop()
		}
	}
	defer e.rt.release()
	if open || len(e.slots) == 0 {
		close(release)
	}
	if !sleepUntil(ctx, e.mono.Add(-instantLead)) {
		e.stop() // ends a closed loop's startWait
		wg.Wait()
		stopClocks()
		return Result{}, ctx.Err()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	emitOne := func(k int, end time.Time) {
		ivHists.Reset()
		iv := Interval{
			Index: k,
			Start: windowStartWall.Add(time.Duration(k) * e.interval),
			End:   windowStartWall.Add(end.Sub(e.windowStart)),
			Hists: ivHists,
		}
		if fs := e.firstSend.Load(); fs != 0 {
			iv.FirstSend = startAt.Add(time.Duration(fs - 1))
		}
		if len(e.workers) == 1 {
			// One worker (an agent pinned to one CPU): its slot is the
			// interval, with no merge into ivHists and no second reset.
			s := e.workers[0].rec.swap(spare)
			iv.Hists = s.hists
			iv.Counts = s.counts
			emit(iv)
			s.reset()
			spare = s
			return
		}
		for _, w := range e.workers {
			s := w.rec.swap(spare)
			if err := iv.Hists.Merge(s.hists); err != nil {
				e.cfg.Logger.Error("merge interval", "err", err)
			}
			iv.Counts.Add(&s.counts)
			s.reset()
			spare = s
		}
		emit(iv)
	}
	finished, stoppedEarly := false, false
	for k := 0; !finished; k++ {
		end := e.windowStart.Add(time.Duration(k+1) * e.interval)
		last := !e.windowEnd.IsZero() && !end.Before(e.windowEnd)
		if last {
			end = e.windowEnd
		}
		timer := time.NewTimer(time.Until(end.Add(2 * time.Millisecond)))
		select {
		case <-timer.C:
		case <-done:
			finished = true
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			break
		}
		if last && !finished {
			// The last interval is emitted once every connection has
			// finished, so no in-window sample is missed.
			select {
			case <-done:
			case <-ctx.Done():
			}
			finished = true
		}
		if ctx.Err() != nil {
			break
		}
		if !finished {
			emitOne(k, end)
			continue
		}
		// Count mode, or a window ended by EndWindow, may end inside
		// interval k or, if the collector was late, past it: emit through
		// the interval of the last end. Every slot has exited, so the
		// window's end may change now.
		windowEnd := e.windowEnd
		unsentUntil := e.windowEnd // open-loop tickets due before it were all due
		stoppedEarly = e.endedEarly()
		if stoppedEarly {
			unsentUntil = e.endedAt
		}
		if e.countDone() || stoppedEarly {
			if le := e.lastEnd(); windowEnd.IsZero() || le.Before(windowEnd) {
				windowEnd = le
			}
		}
		lastK := max(k, e.intervalOf(windowEnd.Add(-1)))
		e.countUnsent(lastK, unsentUntil)
		for ; k <= lastK; k++ {
			ivEnd := e.windowStart.Add(time.Duration(k+1) * e.interval)
			if k == lastK || ivEnd.After(windowEnd) {
				ivEnd = windowEnd
			}
			emitOne(k, ivEnd)
		}
		e.windowEnd = windowEnd
	}
	<-done
	stopClocks()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res := Result{WindowEnd: windowStartWall.Add(e.windowEnd.Sub(e.windowStart)), MaxStreams: int(e.maxStreams.Load()), StoppedEarly: stoppedEarly}
	e.connsMu.Lock()
	defer e.connsMu.Unlock()
	for _, t := range e.tallies() {
		res.Issued += t.issued.Load()
		res.InFlight += t.inFlight.Load()
	}
	for _, w := range e.workers {
		res.Warmup.Add(&w.rec.warmup)
	}
	mix, err := e.mixResults()
	if err != nil {
		return Result{}, err
	}
	res.Mix = mix
	if fs := e.firstSend.Load(); fs != 0 {
		res.FirstSend = startAt.Add(time.Duration(fs - 1))
	}
	for i := 1; i < len(e.stageStarts); i++ {
		var at time.Time
		if late := e.stageLate[i].Load(); late != 0 {
			at = startAt.Add(e.stageStarts[i] + time.Duration(late-1))
		}
		res.StageChanges = append(res.StageChanges, at)
	}
	if e.plan.Protocol != plan.H2 {
		res.MaxStreams = 0
	}
	return res, nil
}

// countUnsent counts, as missed in interval k, the open-loop requests the
// schedule had due before until (the window's planned end, or the instant
// EndWindow ended it) that no connection took (every one was busy until
// then): they are never silently dropped.
func (e *Engine) countUnsent(k int, until time.Time) {
	if e.windowEnd.IsZero() || e.cfg.Share.Requests > 0 {
		return
	}
	end := e.rawCutoff(until.Sub(e.mono)) // paced before until
	ws := e.rawCutoff(e.windowStart.Sub(e.mono))
	for _, w := range e.workers {
		if !w.open {
			continue
		}
		// Tickets are taken in order: those not taken are the latest due.
		// Only the window's count; a warm-up ticket never taken is the
		// warm-up's (its counts are not reported).
		due := w.ticketsBefore(end)
		unsent := min(due-w.taken.Load(), due-w.ticketsBefore(ws))
		if unsent > 0 {
			w.rec.mu.Lock()
			cnt := w.rec.counts(k)
			cnt.Missed += unsent
			cnt.Unsent += unsent
			cnt.Backlogged += unsent
			w.rec.mu.Unlock()
		}
	}
}

// ticketsBefore returns how many of worker w's open-loop tickets the
// schedule has due before raw instant t (from the engine's start).
func (w *worker) ticketsBefore(t time.Duration) int64 {
	due := w.sched.cumulative(t) - w.phase
	if due < 0 {
		return 0
	}
	n := int64(due) + 1
	if at, ok := w.sched.at(float64(int64(due)) + w.phase); !ok || at >= t {
		n-- // the last ticket counted falls at or after t
	}
	return n
}

// EndWindow ends the measurement window now, before its planned end (or
// before the request count runs out), as a graceful Ctrl-C does: no
// connection slot issues another request (open-loop tickets waiting for
// their intended time are given back unsent), the requests in flight finish
// (each bounded by the plan's timeout) and are counted, and Run then emits
// the remaining intervals and returns normally, as when a count runs out:
// Result.WindowEnd is the last in-window request's end and
// Result.StoppedEarly is set. Open-loop sends due before this instant that
// no connection took count as missed; those due after it do not.
//
// EndWindow is idempotent and safe to call from any goroutine, at any
// time: before Run (Run then issues nothing, and reports an empty window
// at its start), during the warm-up (an empty window), or after the window
// has ended or Run has returned (no effect: StoppedEarly stays false).
func (e *Engine) EndWindow() {
	e.endOnce.Do(func() {
		e.endedAt = time.Now()
		e.ended.Store(true)
		close(e.endCh)
	})
}

// endedEarly reports whether EndWindow cut the window short: it was called
// before the window's planned end, and before the count was done (every
// request taken and sent). Called by Run once every slot has exited.
func (e *Engine) endedEarly() bool {
	if !e.ended.Load() {
		return false
	}
	if !e.windowEnd.IsZero() && !e.endedAt.Before(e.windowEnd) {
		return false
	}
	return !e.countDone() || e.aborted.Load() > 0
}

// countDone reports whether the request count has run out.
func (e *Engine) countDone() bool {
	if e.cfg.Share.Requests <= 0 {
		// An open-loop schedule that ran out before the window's end
		// (stages ending at zero) also ends the window early only at its
		// planned end: nothing to do here.
		return false
	}
	for _, w := range e.workers {
		if w.budget.Load() > 0 {
			return false
		}
	}
	return true
}

// tallies returns every connection slot's accounting. Called with
// connsMu held, or once no slot can be added.
func (e *Engine) tallies() []*tally {
	var out []*tally
	for _, c := range e.slots {
		out = append(out, c.accounts())
	}
	return out
}

// lastEnd returns the latest in-window request end across connections, or
// the window start when nothing ended.
func (e *Engine) lastEnd() time.Time {
	e.connsMu.Lock()
	defer e.connsMu.Unlock()
	le := e.windowStart
	for _, t := range e.tallies() {
		if ns := t.lastEnd.Load(); ns != 0 {
			if end := e.mono.Add(time.Duration(ns - 1)); end.After(le) {
				le = end
			}
		}
	}
	return le
}

// intervalOf returns the interval index of an instant: -1 in the warm-up
// (or 0 before the start when there is no warm-up: connections prepared
// before the start count in the first interval).
func (e *Engine) intervalOf(t time.Time) int {
	if t.Before(e.windowStart) {
		if e.plan.Warmup > 0 {
			return -1
		}
		return 0
	}
	return int(t.Sub(e.windowStart) / e.interval)
}

// noteStage records, for an open-loop send intended at t0 and begun at
// sent, or a closed-loop slot's first send after the instant t0 it waited
// for (a stage raising the connection target activated it), the lateness
// of the first such send of each stage.
func (e *Engine) noteStage(t0, sent time.Time) {
	off := t0.Sub(e.mono)
	for i := len(e.stageStarts) - 1; i >= 1; i-- {
		if off >= e.stageStarts[i] {
			if e.stageLate[i].Load() == 0 {
				e.stageLate[i].CompareAndSwap(0, 1+int64(max(sent.Sub(t0), 0)))
			}
			return
		}
	}
}

// noteSend records an actual send at t, keeping the earliest: the start
// skew compares when agents really began, not when they were scheduled to.
func (e *Engine) noteSend(t time.Time) {
	if e.rt.pending.Load() {
		e.rt.release()
	}
	off := int64(t.Sub(e.mono)) + 1
	for {
		cur := e.firstSend.Load()
		if cur != 0 && cur <= off {
			return
		}
		if e.firstSend.CompareAndSwap(cur, off) {
			return
		}
	}
}

// isStopped reports whether the engine was stopped.
func (e *Engine) isStopped() bool {
	select {
	case <-e.stopped:
		return true
	default:
		return false
	}
}

// Close closes every connection. It is safe to call more than once and
// concurrently with Run.
func (e *Engine) Close() { e.stop() }

func (e *Engine) stop() {
	e.stopOnce.Do(func() {
		close(e.stopped)
		e.cancel()
		e.connsMu.Lock()
		for _, c := range e.slots {
			c.close()
		}
		e.connsMu.Unlock()
	})
}

// startWait blocks a closed loop's first slot until the start instant, or
// until the engine is stopped or its window ended: a Go timer to
// instantLead before it, then waitInstant, whose real-time priority the
// engine keeps until its first send is answered (rtHold).
func (e *Engine) startWait() {
	timer := time.NewTimer(time.Hour)
	stopTimer(timer)
	if d := time.Until(e.mono) - instantLead; d > 0 && !e.wait(timer, d) {
		return
	}
	e.rt.add(waitInstant(e.mono, instantHold))
}

// instantSpin is how long before a start or stage instant waitInstant
// stops sleeping and spins: its thread then holds a CPU when the instant
// comes, instead of waiting for one after a wakeup while other goroutines
// or agents run. Chosen by measurement (bench/README.md, "Measured design
// choices").
const instantSpin = 500 * time.Microsecond

// instantLead is how long before the run's start instant, or an open-loop
// stage's first send, a Go timer hands over to waitInstant's kernel timer:
// longer than the milliseconds a Go timer wakes late on a loaded host
// (3-10 ms, once 30 ms, at load average 10-22 on 2 CPUs), where with a
// 2 ms lead one run in three started 1-48 ms late on one of two agents
// (bench/skew.sh; bench/README.md, "Measured design choices"). The
// coordinator's start comes about 100 ms after its message, so the kernel
// timer mostly waits alone; its thread sleeps meanwhile, costing no CPU.
const instantLead = 100 * time.Millisecond

// instantHold is how long before such an instant waitInstant keeps its
// goroutine's processor (a raw sleep), so that the wake-up at the instant
// needs no other thread. Longer is worse: with 10 ms the runtime's monitor
// (sysmon) took the goroutine for one running 10 ms, and its preemption
// signals (56-59 per wait) ended with the locked thread giving up its
// processor: 0.1-115 ms late in 5 of 20 closed-loop runs (bench/skew.sh).
const instantHold = time.Millisecond

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

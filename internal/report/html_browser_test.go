package report_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/phalanxload/phalanx/internal/compare"
	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// synth describes a synthetic run: Intervals intervals of Step, Agents
// agents, PerInterval responses per interval (all agents), open loop in 3
// stages, latencies lognormal around 800 µs with a day's swing; the
// intervals in [SpikeFrom, SpikeTo) (fractions of the run) are 4 times
// slower. Every interval keeps its histograms encoded (as RunFromProto
// does): latency, service time, send lateness, TTFB (one per response,
// also slower in the spike) and, for the connections it opened (64 in the
// first interval, then one in 5), connect and TLS full or resumed; the
// whole window's are their sums.
type synth struct {
	Intervals, Agents, PerInterval int
	Step                           time.Duration
	SpikeFrom, SpikeTo             float64
	// Scale multiplies every latency (0: 1).
	Scale float64
	// AgentIntervals keeps each agent's own intervals (a third of each
	// merged one's responses) and gives the agents a provenance.
	AgentIntervals bool
}

func (s synth) run(tb testing.TB) *report.Run {
	tb.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	window := time.Duration(s.Intervals) * s.Step
	rate := float64(s.PerInterval) / s.Step.Seconds()
	run := &report.Run{
		ID: "20261201T120000Z-5e7a1c", Target: "https://127.0.0.1:8443/", Load: plan.OpenLoop,
		Connections: 64, PlanDuration: window, StartedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Window: window,
		OnAgentLoss: "abort", Histograms: hist.NewSet(), StartSkew: 180 * time.Microsecond, PacingWindow: time.Millisecond, PacingSpin: true,
	}
	third := window / 3
	for i := range 3 { // a ramp from 0 to the rate, then two stages at it
		from := int64(rate)
		if i == 0 {
			from = 0
		}
		run.Stages = append(run.Stages, report.StageRun{Index: int32(i), Start: time.Duration(i) * third, Duration: third,
			TargetFrom: from, TargetTo: int64(rate), Latency: hist.New()})
	}
	iv, sv, lv := hist.New(), hist.New(), hist.New()
	phases := map[hist.Kind]*hist.Histogram{hist.Connect: hist.New(), hist.TLSFull: hist.New(), hist.TLSResumed: hist.New(), hist.TTFB: hist.New()}
	var opened int64
	for i := range s.Intervals {
		iv.Reset()
		sv.Reset()
		lv.Reset()
		for _, h := range phases {
			h.Reset()
		}
		start := time.Duration(i) * s.Step
		st := &run.Stages[min(int(start/third), 2)]
		frac := float64(i) / float64(s.Intervals)
		scale := 800 * (1 + 0.4*math.Sin(2*math.Pi*frac))
		if s.Scale > 0 {
			scale *= s.Scale
		}
		if frac >= s.SpikeFrom && frac < s.SpikeTo {
			scale *= 4
		}
		for range s.PerInterval {
			us := int64(scale*math.Exp(0.35*rng.NormFloat64())) + 1
			iv.RecordMicros(us)
			run.Histograms.Latency.RecordMicros(us)
			st.Latency.RecordMicros(us)
			service := max(us-int64(rng.IntN(40)), 1)
			run.Histograms.Service.RecordMicros(service)
			sv.RecordMicros(service)
			lv.RecordMicros(1 + int64(rng.ExpFloat64()*8))
			phases[hist.TTFB].RecordMicros(max(us/2+int64(rng.IntN(60)), 1))
		}
		conns := 0
		if i == 0 {
			conns = 64
		} else if rng.IntN(5) == 0 {
			conns = 1
		}
		for c := range conns {
			phases[hist.Connect].RecordMicros(40 + int64(rng.IntN(60)))
			if c%4 == 3 {
				phases[hist.TLSResumed].RecordMicros(300 + int64(rng.IntN(100)))
			} else {
				phases[hist.TLSFull].RecordMicros(900 + int64(rng.IntN(400)) + int64(scale/4))
			}
		}
		opened += int64(conns)
		if err := run.Histograms.Lateness.Merge(lv); err != nil {
			tb.Fatal(err)
		}
		pt := report.Interval{Index: int32(i), Start: start, Length: s.Step, Requests: int64(s.PerInterval), Connections: int64(conns),
			Errors: int64(rng.IntN(3)), TargetRPS: rate, Agents: int32(s.Agents)}
		pt.V2[hist.Latency], pt.V2[hist.Service], pt.V2[hist.Lateness] = encode(tb, iv), encode(tb, sv), encode(tb, lv)
		for k, h := range phases {
			if err := run.Histograms.Get(k).Merge(h); err != nil {
				tb.Fatal(err)
			}
			if h.Count() > 0 {
				pt.V2[k] = encode(tb, h)
			}
		}
		if st.Index == 0 {
			pt.TargetRPS = rate * (start.Seconds() + s.Step.Seconds()/2) / third.Seconds()
		}
		st.Counts.Requests += pt.Requests
		if err := st.Counts.AddStatus(200, pt.Requests); err != nil {
			tb.Fatal(err)
		}
		for a := range s.Agents {
			pt.CPUBusy = append(pt.CPUBusy, 0.3+0.1*float64(a)+0.15*math.Sin(2*math.Pi*frac+float64(a)))
		}
		run.Timeline = append(run.Timeline, pt)
		run.Counts.Requests += pt.Requests
	}
	c := &run.Counts
	c.BytesRead, c.ConnectionsOpened = c.Requests*870, opened
	c.HandshakesResumed = run.Histograms.TLSResumed.Count()
	c.HandshakesFull = opened - c.HandshakesResumed
	if err := c.AddStatus(200, c.Requests); err != nil {
		tb.Fatal(err)
	}
	if err := c.AddError("timeout", 3); err != nil {
		tb.Fatal(err)
	}
	c.Issued = c.Requests + 3
	c.TLS = map[string]int64{"version:TLS 1.3": 64, "cipher:TLS_AES_128_GCM_SHA256": 64, "group:X25519MLKEM768": 64, "alpn:h2": 64}
	for a := range s.Agents {
		var pr *report.AgentProvenance
		var ivs []report.AgentInterval
		if s.AgentIntervals {
			pr = &report.AgentProvenance{Hostname: fmt.Sprintf("load-%d", a+1), Kernel: "Linux 6.1.0-18-amd64", CPUModel: "AMD EPYC 7763 64-Core Processor",
				CPUCount: 16, GoVersion: "go1.26.8", OSArch: "linux/amd64", TLSLibrary: "crypto/tls", TLSLibraryVersion: "go1.26.8", AgentVersion: "v0.9.0"}
			for _, pt := range run.Timeline {
				ivs = append(ivs, report.AgentInterval{Index: pt.Index, Start: pt.Start, Length: pt.Length, Requests: pt.Requests / int64(s.Agents)})
			}
		}
		run.Agents = append(run.Agents, report.AgentRun{Provenance: pr, Intervals: ivs,
			Name: fmt.Sprintf("agent-%d", a+1), Connections: 64 / int64(s.Agents), Requests: c.Requests / int64(s.Agents),
			CPUTime: time.Duration(float64(window) * 0.35 * 4), CPUs: 4, CPUList: fmt.Sprintf("%d-%d", 4*a, 4*a+3),
			ClockOffset: time.Duration(a*37) * time.Microsecond, RTT: 90 * time.Microsecond,
			StartOffset: time.Duration(a*60) * time.Microsecond, Rate: int64(rate) / int64(s.Agents),
		})
	}
	if s.AgentIntervals { // and a mix of two requests
		run.Requests = []plan.Request{{Method: "GET", URL: "https://127.0.0.1:8443/index1.html"}, {Method: "POST", URL: "https://127.0.0.1:8443/api"}}
		run.MixAgents = s.Agents
		for k := range 2 {
			m := report.MixRun{Latency: hist.New()}
			m.Counts.Requests = c.Requests / 2
			if err := m.Counts.AddStatus(200+k, m.Counts.Requests); err != nil {
				tb.Fatal(err)
			}
			m.Latency.RecordMicros(int64(900 * (k + 1)))
			run.Mix = append(run.Mix, m)
		}
	}
	if s.AgentIntervals { // and thresholds: two latency SLOs, one on a phase
		v := func(f float64) *float64 { return &f }
		run.Verdict.Thresholds = []report.ThresholdResult{{Threshold: "p99<5ms", Value: v(4480), Limit: 5000, Unit: "us", Pass: true},
			{Threshold: "errors<0.1%", Value: v(0.002), Limit: 0.001, Unit: "ratio"}, {Threshold: "ttfb.p99<2ms", Value: v(1750), Limit: 2000, Unit: "us", Pass: true}}
		run.Provenance = report.RunProvenance{PlanHash: "sha256:3f1c0ffee", CoordinatorVersion: "v0.9.0", CoordinatorCommit: "1a2b3c4d5e6f7a8b"}
	}
	return run
}

// encode returns h's V2 compressed encoding, as a result carries it.
func encode(tb testing.TB, h *hist.Histogram) []byte {
	tb.Helper()
	b, err := h.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writePage writes run's HTML report to dir/name and returns its path.
func writePage(tb testing.TB, run *report.Run, dir, name string) string {
	tb.Helper()
	rep, err := report.Build(run)
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, run, rep, report.HTMLOptions{}); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// chromium returns the browser to test the page in: Debian's chromium
// (installed by .ci/run). Without one the test is skipped, unless
// PHALANX_REQUIRE_CHROMIUM=1 (CI) makes that a failure.
func chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PHALANX_REQUIRE_CHROMIUM") == "1" {
		tb.Fatal("no chromium in PATH and PHALANX_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
	}
	tb.Skip("no chromium in PATH (apt-get install chromium; PHALANX_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// browserPage is one tab of a headless Chromium with the page loaded, and
// what the page logged and requested.
type browserPage struct {
	ctx      context.Context
	mu       sync.Mutex
	console  []string // errors and warnings: console calls, exceptions, log entries
	errors   int
	requests []string // every URL the page asked for but the page itself
}

// openBrowserPage starts Chromium (headless, no sandbox, no GPU, no
// background networking), opens the page file and waits until its script
// says it is ready (or has failed). The browser stops at the test's end.
func openBrowserPage(tb testing.TB, file string) *browserPage {
	tb.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(tb)), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(tb.TempDir()))
	ctx, cancel := chromedp.NewContext(alloc)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // start the browser and its tab
		tb.Fatalf("start chromium: %v", err)
	}
	url := "file://" + file
	p := &browserPage{ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.console = append(p.console, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
				if e.Type != runtime.ConsoleAPICalledTypeWarning {
					p.errors++
				}
			}
		case *runtime.EventExceptionThrown:
			p.console = append(p.console, "exception: "+e.ExceptionDetails.Text+" "+describe(e.ExceptionDetails.Exception))
			p.errors++
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				p.console = append(p.console, fmt.Sprintf("log %s %s: %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
				if e.Entry.Level == cdplog.EntryLevelError {
					p.errors++
				}
			}
		case *network.EventRequestWillBeSent:
			if e.Request.URL != url {
				p.requests = append(p.requests, e.Request.URL)
			}
		}
	}); err != nil {
		tb.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, performance.Enable, performance.EnableParams{})
		return err
	}), chromedp.Navigate(url)); err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.phalanx && (window.phalanx.ready || window.phalanx.errors.length > 0)`,
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		tb.Fatalf("page never got ready: %v (console: %v)", err, p.log())
	}
	return p
}

func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	return o.Description
}

func (p *browserPage) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// eval evaluates a JavaScript expression (promises awaited) into T.
func eval[T any](tb testing.TB, p *browserPage, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// pageState is what the test reads from the page after its scripts ran.
type pageState struct {
	Errors  []string         `json:"errors"`
	Ink     map[string]int   `json:"ink"`
	Series  map[string][]int `json:"series"`
	Summary string           `json:"summary"`
	// Thresholds is the thresholds section's text; SLO counts the
	// spectrum's pixels in the SLO line's red.
	Thresholds string         `json:"thresholds"`
	SLO        map[string]int `json:"slo"`
	Agents     string         `json:"agents"`
	Plan       string         `json:"plan"`
	Source     string         `json:"source"`
	Timing     map[string]float64
}

// stateJS measures, for each chart, the coloured pixels of its canvas (the
// grid and axes are grey: a coloured pixel is a drawn series) and, per
// series, its points that are not null.
const stateJS = `(() => {
  const ink = (id) => {
    const c = document.querySelector('#' + id + ' canvas');
    if (!c || !c.width) return -1;
    const g = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < g.length; i += 4) {
      if (g[i + 3] > 0 && (Math.abs(g[i] - g[i + 1]) > 40 || Math.abs(g[i + 1] - g[i + 2]) > 40)) n++;
    }
    return n;
  };
  const red = (id) => {
    const c = document.querySelector('#' + id + ' canvas');
    const g = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < g.length; i += 4) if (g[i + 3] > 200 && Math.abs(g[i] - 0xb3) < 8 && Math.abs(g[i + 1] - 0x26) < 8 && Math.abs(g[i + 2] - 0x1e) < 8) n++;
    return n;
  };
  const series = {};
  for (const [k, u] of Object.entries(phalanx.charts)) series[k] = u.data.slice(1).map((s) => s.filter((v) => v != null).length);
  return {
    errors: phalanx.errors,
    ink: { timeline: ink('timeline-chart'), spectrum: ink('spectrum-chart'), phases: ink('phases-chart'), cpu: ink('cpu-chart'), agentRPS: ink('agent-rps-chart') },
    series, summary: document.getElementById('summary').innerText,
    thresholds: (document.getElementById('thresholds') || {}).innerText || '', slo: { spectrum: red('spectrum-chart'), phases: red('phases-chart') }, agents: document.getElementById('agents').innerText,
    plan: (document.getElementById('plan') || {}).innerText || '',
    source: document.getElementById('spectrum-source').textContent, timing: phalanx.timing,
  };
})()`

// TestHTMLReportInBrowser opens an open-loop, 3-agent run's report in
// headless Chromium: no console error, no network request, every chart
// drawn (coloured pixels on each canvas, every series with points), the
// summary and agent tables filled, a screenshot written to the test's
// artifact directory (go test -artifacts keeps it); then a mouse drag
// across the timeline recomputes the spectrum from that range's interval
// histograms, as the Go side merges them.
func TestHTMLReportInBrowser(t *testing.T) {
	s := synth{Intervals: 120, Agents: 3, PerInterval: 2000, Step: time.Second, SpikeFrom: 0.5, SpikeTo: 0.6, AgentIntervals: true}
	run := s.run(t)
	dir := t.ArtifactDir()
	file := writePage(t, run, dir, "report.html")
	p := openBrowserPage(t, file)

	st := eval[pageState](t, p, stateJS)
	if len(st.Errors) > 0 || p.errors > 0 {
		t.Errorf("page errors %v; console %v", st.Errors, p.log())
	}
	if len(p.requests) > 0 {
		t.Errorf("the page made network requests: %v", p.requests)
	}
	for name, n := range st.Ink {
		if n < 200 {
			t.Errorf("chart %s: %d coloured pixels, want a drawn series (>= 200)", name, n)
		}
	}
	wantSeries := map[string]int{"timeline": 8, "spectrum": 3, "phases": 4, "cpu": 3, "agentRPS": 3}
	for name, want := range wantSeries {
		pts := st.Series[name]
		if len(pts) != want {
			t.Errorf("chart %s: %d series, want %d", name, len(pts), want)
		}
		for i, n := range pts {
			if n == 0 {
				t.Errorf("chart %s: series %d has no point", name, i+1)
			}
		}
	}
	if pts := st.Series["timeline"]; len(pts) > 0 && pts[0] != s.Intervals {
		t.Errorf("timeline p50: %d points, want all %d intervals (no downsampling below 1500)", pts[0], s.Intervals)
	}
	for _, want := range []string{"240,000 requests in 2m", "requests/s", "latency p99", "timeout", "TLS_AES_128_GCM_SHA256", "X25519MLKEM768",
		"Requests of the mix", "POST\thttps://127.0.0.1:8443/api\t120,000\t0\t201 ×120,000\t1.80ms"} {
		if !strings.Contains(st.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, st.Summary)
		}
	}
	for _, want := range []string{"agent-3", "8-11", "Start skew", "180us", "Provenance", "sha256:3f1c0ffee", "v0.9.0 (1a2b3c4d5e6f)",
		"load-2", "Linux 6.1.0-18-amd64", "16 × AMD EPYC 7763", "crypto/tls go1.26.8", "Responses per second by agent"} {
		if !strings.Contains(st.Agents, want) {
			t.Errorf("agents section lacks %q:\n%s", want, st.Agents)
		}
	}
	for _, want := range []string{"pacing window\t1 ms (intended send times rounded down", "pacing spin\teach send's timer wait ended up to 100 µs early"} {
		if !strings.Contains(st.Plan, want) {
			t.Errorf("plan section lacks %q:\n%s", want, st.Plan)
		}
	}
	for _, want := range []string{"p99<5ms\t4.48ms\t5.00ms\tpass", "errors<0.1%\t0.2 %\t0.1 %\tfail", "ttfb.p99<2ms\t1.75ms\t2.00ms\tpass"} {
		if !strings.Contains(st.Thresholds, want) {
			t.Errorf("thresholds section lacks %q:\n%s", want, st.Thresholds)
		}
	}
	if st.SLO["spectrum"] < 50 || st.SLO["phases"] < 50 {
		t.Errorf("SLO lines: %v pixels of their red on the spectra, want both drawn", st.SLO)
	}
	if !strings.HasPrefix(st.Source, "Whole window: 240,000 responses") {
		t.Errorf("spectrum source = %q, want the whole window's 240,000 responses", st.Source)
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	shot := filepath.Join(dir, "report.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("page %s, screenshot %s (%d bytes)", file, shot, len(png))

	// Drag across the timeline's middle: the slow intervals.
	type rect struct{ Left, Top, Width, Height float64 }
	box := eval[rect](t, p, `(() => { const o = document.querySelector('#timeline-chart .u-over'); o.scrollIntoView({block: 'center'});
		const r = o.getBoundingClientRect(); return {left: r.left, top: r.top, width: r.width, height: r.height}; })()`)
	y := box.Top + box.Height/2
	x0, x1 := box.Left+0.52*box.Width, box.Left+0.58*box.Width
	steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(chromedp.MouseMoved, x0, y), chromedp.MouseEvent(chromedp.MousePressed, x0, y, chromedp.ButtonLeft, chromedp.ClickCount(1))}
	for k := 1; k <= 10; k++ {
		steps = append(steps, chromedp.MouseEvent(chromedp.MouseMoved, x0+(x1-x0)*float64(k)/10, y, chromedp.ButtonLeft, func(p *input.DispatchMouseEventParams) { p.Buttons = 1 }))
	}
	steps = append(steps, chromedp.MouseEvent(chromedp.MouseReleased, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		t.Fatal(err)
	}
	type summary struct{ Count, P50, P99, Max int64 }
	type spectrum struct {
		Source           string
		Range            []int
		Latency, Service summary
	}
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](`!!(phalanx.spectrum && phalanx.spectrum.range)`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the drag selected no range: %v (console %v)", err, p.log())
	}
	got := eval[spectrum](t, p, `phalanx.spectrum`)
	if len(got.Range) != 2 || got.Range[0] < 60 || got.Range[1] > 71 || got.Range[1] <= got.Range[0] {
		t.Fatalf("selected intervals %v, want one inside the slow intervals 60-71", got.Range)
	}
	d := dataOf(t, run)
	want := mergedRange(t, d.Intervals.Latency, got.Range[0], got.Range[1])
	wantSum := int64(0)
	for i := got.Range[0]; i <= got.Range[1]; i++ {
		wantSum += run.Timeline[i].Requests
	}
	if got.Latency.Count != wantSum || want.TotalCount() != wantSum {
		t.Errorf("range %v: %d responses, want %d (the intervals' histograms)", got.Range, got.Latency.Count, wantSum)
	}
	if got.Latency.P50 != want.ValueAtPercentile(50) || got.Latency.P99 != want.ValueAtPercentile(99) || got.Latency.Max != want.Max() {
		t.Errorf("range %v: p50 %d, p99 %d, max %d; want hdrhistogram-go's %d, %d, %d of the merged intervals",
			got.Range, got.Latency.P50, got.Latency.P99, got.Latency.Max, want.ValueAtPercentile(50), want.ValueAtPercentile(99), want.Max())
	}
	// The range's service time: the intervals' service histograms merged.
	wantSvc := mergedRange(t, d.Intervals.Service, got.Range[0], got.Range[1])
	if got.Service.Count != wantSum || got.Service.P99 != wantSvc.ValueAtPercentile(99) {
		t.Errorf("range %v: service time %d responses, p99 %d; want %d, %d", got.Range, got.Service.Count, got.Service.P99, wantSum, wantSvc.ValueAtPercentile(99))
	}
	// The range's phases: each phase's interval histograms merged, as for
	// latency; the connects are the connections the range opened.
	type phases struct {
		Source                             string
		Range                              []int
		Connect, TLSFull, TLSResumed, TTFB *summary
	}
	ph := eval[phases](t, p, `phalanx.phases`)
	if !slices.Equal(ph.Range, got.Range) || !strings.HasPrefix(ph.Source, "Selected ") {
		t.Errorf("phases: range %v (source %q), want the spectrum's %v", ph.Range, ph.Source, got.Range)
	}
	var conns int64
	for i := got.Range[0]; i <= got.Range[1]; i++ {
		conns += run.Timeline[i].Connections
	}
	for _, c := range []struct {
		name string
		col  string
		got  *summary
		want int64
	}{{"ttfb", d.Intervals.TTFB, ph.TTFB, wantSum}, {"connect", d.Intervals.Connect, ph.Connect, conns}} {
		w := mergedRange(t, c.col, got.Range[0], got.Range[1])
		switch {
		case c.want == 0 && c.got != nil:
			t.Errorf("range %v %s: %+v, want none (no connection opened)", got.Range, c.name, *c.got)
		case c.want > 0 && c.got == nil:
			t.Errorf("range %v %s: none, want %d samples", got.Range, c.name, c.want)
		case c.got != nil && (c.got.Count != c.want || w.TotalCount() != c.want || c.got.P99 != w.ValueAtPercentile(99) || c.got.Max != w.Max()):
			t.Errorf("range %v %s: %d samples, p99 %d, max %d; want %d (page column %d), %d, %d", got.Range, c.name, c.got.Count, c.got.P99, c.got.Max,
				c.want, w.TotalCount(), w.ValueAtPercentile(99), w.Max())
		}
	}
	if whole := run.Histograms.TTFB.ValueAtPercentile(50); ph.TTFB == nil || ph.TTFB.P50 < 2*whole {
		t.Errorf("range TTFB %+v is not the slow range's (whole window p50 %d µs)", ph.TTFB, whole)
	}
	if whole := run.Histograms.Latency.ValueAtPercentile(50); got.Latency.P50 < 2*whole {
		t.Errorf("range p50 %d µs is not the slow range's (whole window p50 %d µs)", got.Latency.P50, whole)
	}
	if !strings.HasPrefix(got.Source, "Selected ") {
		t.Errorf("spectrum source = %q, want the selected range", got.Source)
	}
	if st := eval[pageState](t, p, stateJS); st.Ink["spectrum"] < 200 || len(st.Errors) > 0 || p.errors > 0 {
		t.Errorf("after the selection: spectrum %d coloured pixels, errors %v, console %v", st.Ink["spectrum"], st.Errors, p.log())
	}
}

// mergedRange returns hdrhistogram-go's 2-digit histogram of the page
// column's intervals [from, to].
func mergedRange(t *testing.T, col string, from, to int) *hdrhistogram.Histogram {
	t.Helper()
	cols, err := report.DecodeHTMLIntervals(col)
	if err != nil {
		t.Fatal(err)
	}
	h := hdrhistogram.New(1, hist.HighestUs, 2)
	for i := from; i <= to; i++ {
		for j := 0; j < len(cols[i]); j += 2 {
			if err := h.RecordValues(cols[i][j], cols[i][j+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// BenchmarkHTMLDayInBrowser opens the report of a synthetic 24-hour,
// 3-agent open-loop run at 1 s intervals (86 400 intervals, 3000
// responses each) in headless Chromium and reports the page's script
// time until every chart is drawn (script-ms: Chromium's ScriptDuration),
// the page's own time to ready (ready-ms), the wall time from the
// navigation to ready, the file's load and parse included (load-ms), the inflating and indexing of
// the interval histograms after the first paint (intervals-ms), a
// whole-day range selection (select-ms) and the file's size (html-MB).
// The goal is script-ms under 2000. Run it with
// go test -run '^$' -bench HTMLDayInBrowser -benchtime 1x ./internal/report/
func BenchmarkHTMLDayInBrowser(b *testing.B) {
	chromium(b)
	s := synth{Intervals: 86400, Agents: 3, PerInterval: 3000, Step: time.Second, SpikeFrom: 0.5, SpikeTo: 0.51}
	run := s.run(b)
	file := writePage(b, run, b.TempDir(), "day.html")
	fi, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		p := openBrowserPage(b, file)
		m, err := chromedp.Run(p.ctx, func(ctx context.Context, t *chromedp.Target) (performance.GetMetricsResult, error) {
			return cdp.Call(ctx, t, performance.GetMetrics, cdp.Empty{})
		})
		if err != nil {
			b.Fatal(err)
		}
		var script float64
		for _, mm := range m.Metrics {
			if mm.Name == "ScriptDuration" {
				script = mm.Value * 1000
			}
		}
		if p.errors > 0 {
			b.Fatalf("console errors: %v", p.log())
		}
		timing := eval[map[string]float64](b, p, `(async () => { await phalanx.selectRange(0, 1e12); return phalanx.timing; })()`)
		b.ReportMetric(script, "script-ms")
		b.ReportMetric(timing["readyMs"], "ready-ms")
		b.ReportMetric(timing["sinceNavigationMs"], "load-ms")
		b.ReportMetric(timing["intervalsMs"], "intervals-ms")
		b.ReportMetric(timing["selectMs"], "select-ms")
		b.ReportMetric(float64(fi.Size())/1e6, "html-MB")
	}
}

// TestHTMLSearchInBrowser opens a capacity search's page (the "search"
// view) in headless Chromium: no console error, no network request, the
// curve drawn with its pass and fail points, the knee and its interval,
// and every step in the table; a screenshot goes to the artifact
// directory.
func TestHTMLSearchInBrowser(t *testing.T) {
	s := &report.Search{SearchID: "search-20261202T050000Z-1a2b3c", URL: "https://127.0.0.1:8443/", Mode: "open", Unit: "requests/s",
		SLOs: []string{"p99<3ms"}, RangeFrom: 1000, RangeTo: 16000, Precision: 0.02, Repeats: 3, Outcome: "found",
		Knee: 4010, KneeLo: 3950, KneeHi: 4080, KneeConfidence: 0.95, Passing: 4000, Failing: 4080, PassingHeld: 3, FailingBroke: 2, KneeRPS: 3998.2, KneeP99Us: 2710, ElapsedS: 410,
		PacingWindowUs: 1000, PacingSpin: true}
	for i, x := range []float64{1000, 2000, 4000, 8000, 6000, 5000, 4500, 4250, 4125, 4000, 4080} {
		p99, verdict := int64(800+x*x/8000), "pass"
		if p99 >= 3000 {
			verdict = "fail"
		}
		s.Steps = append(s.Steps, report.SearchStep{Index: i, Target: x, RunID: fmt.Sprintf("20261202T05%04dZ-00000%d", i, i), AchievedRPS: min(x, 5200) * 0.999,
			P50Us: p99 / 3, P99Us: p99, P999Us: p99 * 2, Verdict: verdict, Why: map[string]string{"fail": "p99<3ms failed"}[verdict]})
		s.Curve = append(s.Curve, report.SearchCurvePt{Target: x, AchievedRPS: min(x, 5200) * 0.999, P99Us: p99, Verdict: verdict})
	}
	dir := t.ArtifactDir()
	var b bytes.Buffer
	if err := report.WriteSearchHTML(&b, s, report.HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "search.html")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := openBrowserPage(t, file)
	type state struct {
		Errors              []string
		Ink                 int
		Pass, Fail          int
		Answer, Steps, Head string
		Sub                 string
	}
	st := eval[state](t, p, `(() => {
  const c = document.querySelector('#curve-chart canvas');
  const g = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let ink = 0;
  for (let i = 0; i < g.length; i += 4) if (g[i + 3] > 0 && (Math.abs(g[i] - g[i + 1]) > 40 || Math.abs(g[i + 1] - g[i + 2]) > 40)) ink++;
  const d = phalanx.charts.curve.data;
  return { errors: phalanx.errors, ink, pass: d[2].filter((v) => v != null).length, fail: d[3].filter((v) => v != null).length,
    answer: document.getElementById('answer').innerText, steps: document.getElementById('steps').innerText, head: document.title,
    sub: document.getElementById('subtitle').textContent };
})()`)
	if len(st.Errors) > 0 || p.errors > 0 || len(p.requests) > 0 {
		t.Errorf("page errors %v, console %v, requests %v", st.Errors, p.log(), p.requests)
	}
	fails := 0
	for _, c := range s.Curve {
		if c.Verdict == "fail" {
			fails++
		}
	}
	if st.Ink < 200 || st.Pass != len(s.Curve)-fails || st.Fail != fails || fails == 0 {
		t.Errorf("curve: %d coloured pixels, %d pass and %d fail points; want it drawn with %d and %d", st.Ink, st.Pass, st.Fail, len(s.Curve)-fails, fails)
	}
	for _, want := range []string{"4,010 requests/s", "3,950 .. 4,080", "95 % CI", "2.71ms", "held in 3 of 3 runs / broke in 2 of 3", "p99 at 4,000"} {
		if !strings.Contains(st.Answer, want) {
			t.Errorf("answer lacks %q:\n%s", want, st.Answer)
		}
	}
	if want := "open loop, rate, paced in 1 ms windows, paced with a spin 1,000..16,000"; !strings.Contains(st.Sub, want) {
		t.Errorf("subtitle %q, want %q in it", st.Sub, want)
	}
	if !strings.Contains(st.Steps, "20261202T050010Z-0000010") || strings.Count(st.Steps, "\tfail\t") != fails || !strings.Contains(st.Head, "capacity search search-20261202T050000Z-1a2b3c") {
		t.Errorf("steps table or title: %q\n%s", st.Head, st.Steps)
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "search.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHTMLCompareInBrowser opens the comparison page (the "compare" view)
// of a baseline run and a candidate 25 % slower in headless Chromium: no
// console error, no network request, the overlaid timeline and spectra
// drawn with every series (both sides), the statistics table holding
// exactly the rows coordctl compare prints (compare.Result.Rows) with the
// latency deltas significant, both runs listed; a screenshot goes to the
// artifact directory.
func TestHTMLCompareInBrowser(t *testing.T) {
	side := func(id string, scale float64) compare.Run {
		r := synth{Intervals: 90, Agents: 2, PerInterval: 1000, Step: time.Second, Scale: scale}.run(t)
		r.ID = id
		rep, err := report.Build(r)
		if err != nil {
			t.Fatal(err)
		}
		return compare.Run{Report: rep, Run: r}
	}
	a, b := []compare.Run{side("20261201T120000Z-baa5e1", 1)}, []compare.Run{side("20261201T130000Z-ca7d1d", 1.25)}
	res, err := compare.Compare(a, b, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.HTML(res, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := report.WriteCompareHTML(&page, c, report.HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.ArtifactDir()
	file := filepath.Join(dir, "compare.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := openBrowserPage(t, file)
	type state struct {
		Errors            []string
		Ink               map[string]int
		Series            map[string][]int
		Stats, Runs, Head string
	}
	st := eval[state](t, p, `(() => {
  const ink = (id) => {
    const c = document.querySelector('#' + id + ' canvas');
    if (!c || !c.width) return -1;
    const g = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < g.length; i += 4) if (g[i + 3] > 0 && (Math.abs(g[i] - g[i + 1]) > 40 || Math.abs(g[i + 1] - g[i + 2]) > 40)) n++;
    return n;
  };
  const series = {};
  for (const [k, u] of Object.entries(phalanx.charts)) series[k] = u.data.slice(1).map((s) => s.filter((v) => v != null).length);
  return { errors: phalanx.errors, ink: { timeline: ink('compare-timeline-chart'), spectrum: ink('compare-spectrum-chart'), phases: ink('compare-phases-chart') },
    series, stats: document.getElementById('stats').innerText, runs: document.getElementById('runs').innerText, head: document.title };
})()`)
	if len(st.Errors) > 0 || p.errors > 0 || len(p.requests) > 0 {
		t.Errorf("page errors %v, console %v, requests %v", st.Errors, p.log(), p.requests)
	}
	for name, n := range st.Ink {
		if n < 200 {
			t.Errorf("chart %s: %d coloured pixels, want drawn series (>= 200)", name, n)
		}
	}
	// Both sides of: p50, p99, RPS; latency and service time; each phase.
	for name, want := range map[string]int{"compareTimeline": 6, "compareSpectrum": 4, "comparePhases": 8} {
		pts := st.Series[name]
		if len(pts) != want {
			t.Errorf("chart %s: %d series, want %d", name, len(pts), want)
		}
		for i, n := range pts {
			if n == 0 {
				t.Errorf("chart %s: series %d has no point", name, i+1)
			}
		}
	}
	rows := res.Rows()
	if len(rows) < 6 {
		t.Fatalf("%d rows in the comparison, want RPS, p50..p99.9 and errors", len(rows))
	}
	for _, r := range rows {
		if line := strings.Join(r.Cells, "\t"); !strings.Contains(st.Stats, line) {
			t.Errorf("statistics table lacks coordctl compare's row %q:\n%s", line, st.Stats)
		}
		if (r.Cells[0] == "p50" || r.Cells[0] == "p99") && (!r.Significant || !strings.HasPrefix(r.Cells[3], "+2")) {
			t.Errorf("row %v: want a significant delta near +25 %%", r.Cells)
		}
	}
	if !strings.Contains(st.Stats, strings.Join(compare.TableHeader, "\t")) {
		t.Errorf("statistics table lacks the header %v:\n%s", compare.TableHeader, st.Stats)
	}
	for _, want := range []string{"baseline\t20261201T120000Z-baa5e1", "candidate\t20261201T130000Z-ca7d1d"} {
		if !strings.Contains(st.Runs, want) {
			t.Errorf("runs table lacks %q:\n%s", want, st.Runs)
		}
	}
	if !strings.Contains(st.Head, "1 baseline run vs 1 candidate run") {
		t.Errorf("title %q", st.Head)
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("page %s, screenshot %s", file, filepath.Join(dir, "compare.png"))
}

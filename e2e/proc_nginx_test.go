package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
)

// procReport is the JSON report as documented (the interface), decoded
// independently of internal/report's types so that a renamed field fails.
type procReport struct {
	RunID       string           `json:"run_id"`
	Target      string           `json:"target"`
	StartedAt   time.Time        `json:"started_at"`
	DurationS   float64          `json:"duration_s"`
	AgentCount  int              `json:"agent_count"`
	Connections int64            `json:"connections"`
	Issued      int64            `json:"issued"`
	Requests    int64            `json:"requests"`
	InFlight    int64            `json:"in_flight"`
	RPS         float64          `json:"rps"`
	BytesRead   int64            `json:"bytes_read"`
	TransferBps float64          `json:"transfer_bps"`
	Status      map[string]int64 `json:"status"`
	Non2xx3xx   int64            `json:"non_2xx_3xx"`
	Errors      map[string]int64 `json:"errors"`
	Latency     *struct {
		Min   int64   `json:"min"`
		Mean  float64 `json:"mean"`
		Stdev float64 `json:"stdev"`
		P50   int64   `json:"p50"`
		P75   int64   `json:"p75"`
		P90   int64   `json:"p90"`
		P99   int64   `json:"p99"`
		P999  int64   `json:"p999"`
		P9999 int64   `json:"p9999"`
		Max   int64   `json:"max"`
		Count int64   `json:"count"`
	} `json:"latency_us"`
	StartSkewUs float64 `json:"start_skew_us"`
	Agents      []struct {
		Name          string  `json:"name"`
		Connections   int64   `json:"connections"`
		Requests      int64   `json:"requests"`
		Errors        int64   `json:"errors"`
		InFlight      int64   `json:"in_flight"`
		RPS           float64 `json:"rps"`
		CPUUtil       float64 `json:"cpu_util"`
		CPUs          int32   `json:"cpus"`
		ClockOffsetUs float64 `json:"clock_offset_us"`
		RTTUs         float64 `json:"rtt_us"`
		StartOffsetUs float64 `json:"start_offset_us"`
		Error         string  `json:"error"`
	} `json:"agents"`
}

// procReportFields are the documented top-level JSON fields.
var procReportFields = []string{
	"run_id", "target", "started_at", "duration_s", "agent_count", "connections", "issued",
	"requests", "in_flight", "rps", "bytes_read", "transfer_bps", "status", "non_2xx_3xx",
	"errors", "latency_us", "start_skew_us", "agents",
}

// readProcReport decodes the JSON report in file, checking that every
// documented field is present.
func readProcReport(t *testing.T, file string) procReport {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read JSON report: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, data)
	}
	for _, f := range procReportFields {
		if _, ok := fields[f]; !ok {
			t.Errorf("JSON report lacks field %q\n%s", f, data)
		}
	}
	var rep procReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, data)
	}
	return rep
}

func (r *procReport) errorTotal() int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// TestProcNginxCountsMatchAccessLog runs the built coordinator, agents and
// coordctl as processes against a real NGINX, and checks the report
// against NGINX's access log: every request the report counts as completed
// or in flight (drained after the window) is one logged request, exactly.
// The two agents that run it admit only NGINX's address and port
// (--allow-targets); a first run that includes a third agent, whose
// allowlist is elsewhere, is refused at prepare and NGINX logs nothing.
func TestProcNginxCountsMatchAccessLog(t *testing.T) {
	ngx := nginxtest.Start(t, nginxtest.Options{})
	c := startProcCoordinator(t)
	allowNginx := ngx.Addr()
	c.addAgent(t, "proc-agent-1", "--allow-targets", allowNginx)
	c.addAgent(t, "proc-agent-2", "--allow-targets", allowNginx)
	c.addAgent(t, "proc-agent-3", "--allow-targets", "198.18.0.0/15,*.lab.example:443")

	// coordctl agents lists them, idle, with their allowlists.
	out, errOut, code := runCoordctl(t, 10*time.Second, procEnv(), "--coordinator", c.grpcAddr, "agents")
	if code != 0 {
		t.Fatalf("coordctl agents: exit %d\n%s%s", code, out, errOut)
	}
	for i, a := range c.agents {
		allowed := regexp.QuoteMeta(allowNginx)
		if i == 2 {
			allowed = regexp.QuoteMeta("198.18.0.0/15,*.lab.example:443")
		}
		if !regexpLine(out, `^`+a.name+`\s+127\.0\.0\.1:\d+\s+\S+\s+\d+\s+-\s+idle\s+\S+\s+-\s+-\s+`+allowed+`$`) {
			t.Errorf("coordctl agents does not list %s as idle, without caps, with its allowlist:\n%s", a.name, out)
		}
	}

	// All three agents: proc-agent-3 refuses its share, so nobody sends.
	out, errOut, code = runCoordctl(t, 30*time.Second, procEnv(),
		"--coordinator", c.grpcAddr, "run", "-c", "9", "-d", "3s", "--cacert", ngx.CAFile(), ngx.URL())
	wantRefusal := "agent proc-agent-3 refuses the share: target " + ngx.Addr() + " is outside the allowlist 198.18.0.0/15,*.lab.example:443"
	if code != 1 || !strings.Contains(errOut, wantRefusal) {
		t.Errorf("coordctl run with an agent that refuses the target: exit %d, want 1 and %q\nstdout:\n%s\nstderr:\n%s", code, wantRefusal, out, errOut)
	}
	if !strings.Contains(c.agents[2].Stderr(), "share refused: target outside the allowlist") {
		t.Errorf("proc-agent-3 did not log the refusal:\n%s", c.agents[2].Stderr())
	}
	// proc-agent-1 and -2 had accepted their shares: they abandon them,
	// having sent nothing. (The next run's agents are chosen by the
	// coordinator, not by their gossiped state.)
	for _, a := range c.agents[:2] {
		if err := waitUntil(procReadyTimeout, a, func(context.Context) error {
			if !strings.Contains(a.Stderr(), "share abandoned before connect") {
				return errors.New("no \"share abandoned before connect\" in its log")
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v\n%s", a.name, err, a.describe())
		}
	}
	if lines, err := ngx.AccessLog(); err != nil || len(lines) != 0 {
		t.Fatalf("a refused run reached NGINX: %d access log lines (%v)", len(lines), err)
	}

	jsonFile := filepath.Join(t.TempDir(), "report.json")
	const conns, window = 8, 3 * time.Second
	began := time.Now()
	out, errOut, code = runCoordctl(t, 30*time.Second, procEnv(),
		"--coordinator", c.grpcAddr, "run", "--agents", "2", "-c", "8", "-d", "3s", "--cacert", ngx.CAFile(), "--json", jsonFile, ngx.URL())
	took := time.Since(began)
	if code != 0 {
		t.Fatalf("coordctl run: exit %d after %v\nstdout:\n%s\nstderr:\n%s", code, took, out, errOut)
	}
	t.Logf("coordctl run took %v\n%s", took.Round(time.Millisecond), out)
	for _, s := range []string{"Requests/sec:", "Transfer/sec:"} {
		if !strings.Contains(out, s) {
			t.Errorf("text report lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(errOut, "req/s") {
		t.Errorf("no progress line on stderr:\n%s", errOut)
	}

	rep := readProcReport(t, jsonFile)
	if rep.Requests <= 0 {
		t.Fatalf("report has %d requests", rep.Requests)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors = %v, want none", rep.Errors)
	}
	if len(rep.Status) != 1 || rep.Status["200"] != rep.Requests {
		t.Errorf("status = %v, want {200: %d}", rep.Status, rep.Requests)
	}
	if rep.Non2xx3xx != 0 {
		t.Errorf("non_2xx_3xx = %d", rep.Non2xx3xx)
	}
	if rep.Issued != rep.Requests+rep.errorTotal()+rep.InFlight {
		t.Errorf("issued %d != requests %d + errors %d + in flight %d", rep.Issued, rep.Requests, rep.errorTotal(), rep.InFlight)
	}
	if rep.Target != ngx.URL() || rep.Connections != conns || rep.AgentCount != 2 || rep.DurationS != window.Seconds() {
		t.Errorf("target %q, connections %d, agent_count %d, duration_s %v; want %q, %d, 2, %v",
			rep.Target, rep.Connections, rep.AgentCount, rep.DurationS, ngx.URL(), conns, window.Seconds())
	}
	if rep.Latency == nil || rep.Latency.P99 <= 0 || rep.Latency.Count != rep.Requests {
		t.Errorf("latency_us = %+v, want p99 > 0 over %d samples", rep.Latency, rep.Requests)
	}
	if len(rep.Agents) != 2 {
		t.Fatalf("%d agent rows, want 2", len(rep.Agents))
	}
	var sum, inFlight int64
	for _, a := range rep.Agents {
		if a.Requests <= 0 || a.Error != "" || a.Connections != conns/2 {
			t.Errorf("agent row %+v: want requests > 0, %d connections, no error", a, conns/2)
		}
		sum += a.Requests
		inFlight += a.InFlight
	}
	if sum != rep.Requests || inFlight != rep.InFlight {
		t.Errorf("agent rows sum to %d requests, %d in flight; report says %d, %d", sum, inFlight, rep.Requests, rep.InFlight)
	}

	// NGINX logged every completed and every drained request, all 200,
	// over exactly -c connections.
	lines := ngx.WaitLogStable(t, 0)
	if got, want := int64(len(lines)), rep.Requests+rep.InFlight; got != want {
		t.Errorf("access log has %d lines; report has %d requests + %d in flight = %d", got, rep.Requests, rep.InFlight, want)
	}
	bad := 0
	connsSeen := map[int64]bool{}
	for _, l := range lines {
		connsSeen[l.Connection] = true
		if l.Status != 200 || l.Method != "GET" || l.Protocol != "HTTP/1.1" {
			if bad++; bad <= 5 {
				t.Errorf("access log line %q: want GET HTTP/1.1 200", l.Raw)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d access log lines are not GET HTTP/1.1 200", bad, len(lines))
	}
	if len(connsSeen) != conns {
		t.Errorf("requests arrived on %d connections, want %d (-c is the total across agents)", len(connsSeen), conns)
	}
	t.Logf("report: %d requests + %d in flight, %.0f req/s; access log: %d lines on %d connections",
		rep.Requests, rep.InFlight, rep.RPS, len(lines), len(connsSeen))
}

// regexpLine reports whether some line of s matches the regular expression
// re (multi-line mode).
func regexpLine(s, re string) bool {
	return regexp.MustCompile(`(?m)` + re).MatchString(s)
}

package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/version"
)

// formatsReport is the part of the JSON report the format test reads.
type formatsReport struct {
	Requests          int64         `json:"requests"`
	ConnectionsOpened int64         `json:"connections_opened"`
	StartSkewUs       float64       `json:"start_skew_us"`
	Latency           *hist.Summary `json:"latency_us"`
	ServiceTime       *hist.Summary `json:"service_time_us"`
	Connect           *hist.Summary `json:"connect_us"`
	Agents            []struct {
		Name string `json:"name"`
	} `json:"agents"`
	Timeline []struct {
		Requests  int64  `json:"requests"`
		P99Us     int64  `json:"p99_us"`
		LatencyV2 []byte `json:"latency_v2"`
	} `json:"timeline"`
	Provenance *report.Provenance `json:"provenance"`
}

// TestFormatFiles runs an open-loop run on two agents with every format
// flag and checks the files against the JSON report of the same run: the
// .hlog, read back with hdrhistogram-go's log reader, has per interval a
// merged line equal to the report's interval histogram bucket for bucket
// and one line per agent summing to it, and its merged lines together are
// the report's latency; the .hgrm lines at 50, 75 and 90 % are the report's
// percentiles and its footer the report's count and max; the CSV has a
// merged row per interval and its agents' rows sum to it; and the
// provenance of each agent is this host's and this build's.
func TestFormatFiles(t *testing.T) {
	env := newTestEnv(t, 2)
	dir := t.TempDir()
	prefix, hlogFile, csvFile, jsonFile := filepath.Join(dir, "run"), filepath.Join(dir, "run.hlog"), filepath.Join(dir, "run.csv"), filepath.Join(dir, "run.json")
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "-R", "200", "-c", "4", "-d", "2", "--cacert", env.caFile,
		"--json", jsonFile, "--hgrm", prefix, "--hlog", hlogFile, "--csv", csvFile, "--csv-per-agent", env.url)
	if code != 0 {
		t.Fatalf("coordctl run: exit %d: %s", code, stderr)
	}
	var rep formatsReport
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Latency == nil || rep.Requests < 100 || len(rep.Agents) != 2 || len(rep.Timeline) != 2 {
		t.Fatalf("report: %d requests, latency %+v, %d agents, %d intervals", rep.Requests, rep.Latency, len(rep.Agents), len(rep.Timeline))
	}
	merged := checkHlog(t, hlogFile, &rep)
	checkHgrm(t, prefix, &rep, merged)
	checkCSV(t, csvFile, &rep)
	checkProvenance(t, &rep, stdout)
}

// checkHlog reads the .hlog back and returns its merged lines merged.
func checkHlog(t *testing.T, file string, rep *formatsReport) *hdrhistogram.Histogram {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, header := range []string{"#[Histogram log format version 1.3]\n", "#[StartTime: ", "#[BaseTime: ", "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"} {
		if !bytes.Contains(b, []byte(header)) {
			t.Errorf(".hlog lacks %q", header)
		}
	}
	rd := hdrhistogram.NewHistogramLogReader(bytes.NewReader(b))
	all := hdrhistogram.New(hist.LowestUs, hist.HighestUs, hist.SigFigs)
	for k, pt := range rep.Timeline {
		want, err := hist.Decode(pt.LatencyV2)
		if err != nil {
			t.Fatal(err)
		}
		line, err := rd.NextIntervalHistogram()
		if err != nil || line == nil || line.Tag() != "" {
			t.Fatalf("interval %d: merged line %v, %v", k, line, err)
		}
		if !want.Equals(line) {
			t.Errorf("interval %d: merged .hlog line (%d samples) differs from the report's interval histogram (%d)", k, line.TotalCount(), want.Count())
		}
		all.Merge(line)
		agents := hdrhistogram.New(hist.LowestUs, hist.HighestUs, hist.SigFigs)
		for _, a := range rep.Agents {
			al, err := rd.NextIntervalHistogram()
			if err != nil || al == nil || al.Tag() != a.Name {
				t.Fatalf("interval %d: agent %s line: %v (tag %q), %v", k, a.Name, al, al.Tag(), err)
			}
			if al.TotalCount() == 0 {
				t.Errorf("interval %d: agent %s has no sample", k, a.Name)
			}
			agents.Merge(al)
		}
		if !agents.Equals(line) {
			t.Errorf("interval %d: the agents' lines (%d samples) do not merge to the merged line (%d)", k, agents.TotalCount(), line.TotalCount())
		}
	}
	if h, err := rd.NextIntervalHistogram(); h != nil || err != nil {
		t.Errorf("lines after the last interval: %v, %v", h, err)
	}
	// The merged lines together are the report's latency, exactly.
	l := rep.Latency
	q := all.ValueAtPercentiles([]float64{50, 75, 90, 99, 99.9, 99.99})
	if all.TotalCount() != l.Count || all.Min() != l.Min || all.Max() != l.Max || q[50] != l.P50 || q[75] != l.P75 ||
		q[90] != l.P90 || q[99] != l.P99 || q[99.9] != l.P999 || q[99.99] != l.P9999 {
		t.Errorf("merged .hlog lines: count %d min %d max %d percentiles %v; report %+v", all.TotalCount(), all.Min(), all.Max(), q, l)
	}
	return all
}

var hgrmLine = regexp.MustCompile(`^\s*([\d.]+) ([\d.]+)\s+(\d+)`)

// checkHgrm checks the .hgrm files against the report.
func checkHgrm(t *testing.T, prefix string, rep *formatsReport, merged *hdrhistogram.Histogram) {
	t.Helper()
	for name, want := range map[string]*hist.Summary{"latency": rep.Latency, "service_time": rep.ServiceTime, "connect": rep.Connect} {
		b, err := os.ReadFile(prefix + "-" + name + ".hgrm")
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			t.Fatalf("%s: no summary in the report", name)
		}
		at := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if m := hgrmLine.FindStringSubmatch(line); m != nil {
				at[m[2]] = m[1]
			}
		}
		ms := func(us int64) string { return fmt.Sprintf("%.3f", float64(us)/1000) }
		for pct, v := range map[string]int64{"0.500000000000": want.P50, "0.750000000000": want.P75, "0.900000000000": want.P90, "1.000000000000": want.Max} {
			if want.Count < 20 && (pct == "0.750000000000" || pct == "0.900000000000") {
				continue // levels after the one reached at the last value are not printed
			}
			if at[pct] != ms(v) {
				t.Errorf("%s.hgrm at %s: %q ms, report %s ms", name, pct, at[pct], ms(v))
			}
		}
		footer := fmt.Sprintf("#[Max     = %12.3f, Total count    = %12d]", float64(want.Max)/1000, want.Count)
		if !strings.Contains(string(b), footer) {
			t.Errorf("%s.hgrm lacks %q:\n%s", name, footer, b)
		}
	}
	if _, err := os.Stat(prefix + "-ttfb.hgrm"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(readFile(t, prefix+"-latency.hgrm"), fmt.Sprintf("#[Mean    = %12.3f,", merged.Mean()/1000)) {
		t.Errorf("latency.hgrm mean is not the merged histogram's %.3f ms", merged.Mean()/1000)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkCSV checks the timeline CSV against the report.
func checkCSV(t *testing.T, file string, rep *formatsReport) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(readFile(t, file))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + len(rep.Timeline)*(1+len(rep.Agents)); len(rows) != want {
		t.Fatalf("CSV has %d rows, want %d", len(rows), want)
	}
	var agentSum int64
	k := -1
	for _, row := range rows[1:] {
		n, _ := strconv.ParseInt(row[4], 10, 64)
		if row[3] != report.CSVMerged {
			agentSum += n
			continue
		}
		if k >= 0 && agentSum != rep.Timeline[k].Requests {
			t.Errorf("interval %d: agents' rows sum to %d requests, report %d", k, agentSum, rep.Timeline[k].Requests)
		}
		k, agentSum = k+1, 0
		p99, _ := strconv.ParseInt(row[12], 10, 64)
		if n != rep.Timeline[k].Requests || p99 != rep.Timeline[k].P99Us {
			t.Errorf("interval %d: CSV %d requests p99 %d us, report %d and %d", k, n, p99, rep.Timeline[k].Requests, rep.Timeline[k].P99Us)
		}
	}
	if agentSum != rep.Timeline[k].Requests {
		t.Errorf("last interval: agents' rows sum to %d requests, report %d", agentSum, rep.Timeline[k].Requests)
	}
}

// checkProvenance checks each agent's provenance against this host, read
// another way (uname, getconf, os.Hostname), and this build.
func checkProvenance(t *testing.T, rep *formatsReport, text string) {
	t.Helper()
	pv := rep.Provenance
	if pv == nil || len(pv.Agents) != 2 {
		t.Fatalf("provenance %+v", pv)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(pv.PlanHash) || pv.CoordinatorVersion != version.Version || pv.StartSkewUs != rep.StartSkewUs {
		t.Errorf("run provenance: plan hash %q, coordinator %q, start skew %v (report %v)", pv.PlanHash, pv.CoordinatorVersion, pv.StartSkewUs, rep.StartSkewUs)
	}
	host, _ := os.Hostname()
	kernel := command(t, "uname", "-sr")
	online, _ := strconv.Atoi(command(t, "getconf", "_NPROCESSORS_ONLN"))
	for _, a := range pv.Agents {
		p := a.AgentProvenance
		if p == nil {
			t.Fatalf("agent %s sent no provenance", a.Name)
		}
		if p.Hostname != host || (kernel != "" && p.Kernel != kernel) || (online > 0 && int(p.CPUCount) != online) ||
			p.GoVersion != runtime.Version() || p.OSArch != runtime.GOOS+"/"+runtime.GOARCH ||
			p.TLSLibrary != "crypto/tls" || p.TLSLibraryVersion != runtime.Version() ||
			p.AgentVersion != version.Version || p.AgentCommit != version.Commit || a.CPUs != 1 {
			t.Errorf("agent %s provenance %+v, cpus %d; want host %q, kernel %q, %d CPUs online, %s, 1 CPU used", a.Name, p, a.CPUs, host, kernel, online, runtime.Version())
		}
		if a.ClockOffsetUs > 50_000 || a.ClockOffsetUs < -50_000 {
			t.Errorf("agent %s clock offset %v us in one process", a.Name, a.ClockOffsetUs)
		}
	}
	if !strings.Contains(text, "Provenance: plan "+pv.PlanHash) || !strings.Contains(text, "host "+host) {
		t.Errorf("text report lacks the provenance block:\n%s", text)
	}
}

// command returns cmd's trimmed output, or "" when it cannot run.
func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Logf("%s: %v (not checked)", name, err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// TestFormatUsageErrors: the format flags' mistakes are usage errors (exit
// 2) naming the flag, found before any run (no coordinator is dialled).
func TestFormatUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--csv-per-agent"}, "--csv-per-agent: needs --csv FILE"},
		{[]string{"--hlog", "-"}, "--hlog: writes files only"},
		{[]string{"--hgrm", "-"}, "--hgrm: writes files only"},
		{[]string{"--csv", filepath.Join(dir, "no", "such", "dir.csv")}, "--csv: "},
	} {
		args := append([]string{"--coordinator", "127.0.0.1:1", "run", "-d", "1"}, tc.args...)
		code, _, stderr := runCLI(append(args, "https://127.0.0.1:1/")...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordctl run %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused runs left files: %v", entries)
	}
}

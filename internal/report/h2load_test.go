package report_test

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Real h2load (nghttp2 1.52.0) outputs against a local NGINX: h2c with 4
// streams per client, all 404 over h2c, and HTTP/1.1 (--h1), kept in
// testdata/h2load; their summary, from "finished in" on, is the layout of
// WriteH2load.
var h2loadCaptures = []string{"h2c.txt", "status404.txt", "http1.txt"}

// h2loadSummary returns the summary lines of an h2load output.
func h2loadSummary(lines []string) []string {
	for i, l := range lines {
		if strings.HasPrefix(l, "finished in ") {
			return lines[i:]
		}
	}
	return nil
}

// tokenEnds returns where each whitespace-separated token after a
// table's label ends: h2load right-aligns its columns (std::setw).
func tokenEnds(line string) []int {
	i := strings.Index(line, ":")
	var out []int
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(line[i+1:], -1) {
		out = append(out, i+1+m[1])
	}
	return out
}

// TestGoldenH2load compares WriteH2load with testdata/report.h2load.txt;
// -update rewrites it.
func TestGoldenH2load(t *testing.T) {
	golden(t, "report.h2load.txt", []byte(h2loadText(t, result(t))))
}

// h2loadText is res's report in h2load's layout.
func h2loadText(t *testing.T, res *pb.RunResult) string {
	t.Helper()
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteH2load(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestH2loadLayoutMatchesRealH2load: the golden h2load summary has real
// h2load's lines, in its order, with the same labels, and its table's
// columns end where h2load's do.
func TestH2loadLayoutMatchesRealH2load(t *testing.T) {
	got := readLines(t, filepath.Join("testdata", "report.h2load.txt"))
	if last := got[len(got)-1]; !strings.HasPrefix(last, "Run ID: ") {
		t.Fatalf("last line %q, want the run ID", last)
	}
	got = got[:len(got)-1]
	for _, name := range h2loadCaptures {
		want := h2loadSummary(readLines(t, filepath.Join("testdata", "h2load", name)))
		if len(want) != len(got) {
			t.Errorf("%s: %d summary lines, the golden %d", name, len(want), len(got))
			continue
		}
		for i := range want {
			// A figure h2load defines but Phalanx does not measure is "-"
			// (time to 1st byte per client; req/s's min, max, sd across
			// clients): it stands where h2load's number (or "N%") does.
			if sw, sg := skeleton(want[i]), skeleton(got[i]); sw != sg && (!strings.Contains(got[i], " - ") || strings.ReplaceAll(sw, "%", "") != sg) {
				t.Errorf("%s line %d: golden %q (%q), h2load %q (%q)", name, i, got[i], sg, want[i], sw)
			}
			if strings.Contains(want[i], "   min   ") || strings.HasPrefix(want[i], "time ") || strings.HasPrefix(want[i], "req/s ") {
				if g, w := tokenEnds(got[i]), tokenEnds(want[i]); !equalInts(g, w) {
					t.Errorf("%s line %d %q: columns end at %v, h2load's at %v", name, i, got[i], g, w)
				}
			}
		}
	}
}

// h2loadResult is what a script that parses h2load's summary reads.
type h2loadResult struct {
	finished                                                string
	reqs                                                    [7]int64
	status                                                  [4]int64
	traffic, headers, data                                  int64
	savings                                                 string
	requestMin, requestMax, connectMean, ttfbMax, reqPerSec string
}

func parseH2load(text string) (h2loadResult, int) {
	var r h2loadResult
	found := 0
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, l := range strings.Split(text, "\n") {
		if m := regexp.MustCompile(`^finished in (\S+), ([\d.]+) req/s, (\S+)/s$`).FindStringSubmatch(l); m != nil {
			r.finished = m[1]
			found++
		}
		if m := regexp.MustCompile(`^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout$`).FindStringSubmatch(l); m != nil {
			for i := range r.reqs {
				r.reqs[i] = num(m[i+1])
			}
			found++
		}
		if m := regexp.MustCompile(`^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx$`).FindStringSubmatch(l); m != nil {
			for i := range r.status {
				r.status[i] = num(m[i+1])
			}
			found++
		}
		if m := regexp.MustCompile(`^traffic: \S+ \((\d+)\) total, \S+ \((\d+)\) headers \(space savings ([\d.]+)%\), \S+ \((\d+)\) data$`).FindStringSubmatch(l); m != nil {
			r.traffic, r.headers, r.savings, r.data = num(m[1]), num(m[2]), m[3], num(m[4])
			found++
		}
		row := regexp.MustCompile(`^(time for request|time for connect|time to 1st byte|req/s           ):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([\d.]+)%$`).FindStringSubmatch(l)
		if row == nil {
			continue
		}
		found++
		switch row[1] {
		case "time for request":
			r.requestMin, r.requestMax = row[2], row[3]
		case "time for connect":
			r.connectMean = row[4]
		case "time to 1st byte":
			r.ttfbMax = row[3]
		default:
			r.reqPerSec = row[4]
		}
	}
	return r, found
}

// TestH2loadParserReadsSummary: the parser reads real h2load output, and
// Phalanx's golden summary to its figures.
func TestH2loadParserReadsSummary(t *testing.T) {
	for _, name := range h2loadCaptures {
		if _, n := parseH2load(strings.Join(readLines(t, filepath.Join("testdata", "h2load", name)), "\n")); n != 8 {
			t.Errorf("the parser reads %d of 8 lines of real h2load output %s", n, name)
		}
	}
	got, n := parseH2load(strings.Join(readLines(t, filepath.Join("testdata", "report.h2load.txt")), "\n"))
	want := h2loadResult{
		finished: "2.00s",
		// 1005 issued; 1000 responses and 3 errors done; 990 2xx.
		reqs:    [7]int64{1005, 1005, 1003, 990, 13, 3, 1},
		status:  [4]int64{990, 0, 0, 10},
		traffic: 1 << 20, headers: 150_000, savings: "40.00", data: 890_000,
		// The time to 1st byte and req/s rows are "-" where h2load's
		// per-client figures are not measured: a parser of numbers skips
		// them (6 of 8 lines) rather than read per-request or per-agent
		// figures as h2load's.
		requestMin: "1us", requestMax: "1.00ms", connectMean: "60us",
	}
	if n != 6 || got != want {
		t.Errorf("parsed %d lines: %+v\nwant %+v", n, got, want)
	}
}

// TestH2loadPerClientRows: h2load's time to 1st byte (per client, from its
// connect) is not measured, so its row is "-", never the per-request TTFB;
// req/s is per client: in a closed loop its mean is RPS / connections
// (500 req/s over 4 connections: 125.00), the rest "-"; in open loop "-".
func TestH2loadPerClientRows(t *testing.T) {
	closed := h2loadText(t, result(t))
	for _, want := range []string{
		"\ntime to 1st byte:          -           -           -           -         -\n",
		"\nreq/s           :          -           -      125.00           -         -\n",
	} {
		if !strings.Contains(closed, want) {
			t.Errorf("h2load summary lacks %q:\n%s", want, closed)
		}
	}
	open := h2loadText(t, openResult(t, 40))
	if want := "\nreq/s           :          -           -           -           -         -\n"; !strings.Contains(open, want) {
		t.Errorf("open-loop h2load summary lacks %q:\n%s", want, open)
	}
}

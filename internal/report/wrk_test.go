package report_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Real wrk 4.1.0 --latency outputs (Debian's /usr/bin/wrk against a local
// NGINX and, for the socket errors, a server that answers every other
// request after wrk's 1 s timeout), kept in testdata/wrk: the layout
// Phalanx's text report follows.
var wrkCaptures = []string{"latency.txt", "non2xx.txt", "socket_errors.txt"}

// wrkNumber is a figure as wrk prints it: a number with its unit suffix
// (us, ms, s, k, M, KB, MB, %...), or Phalanx's "-" for an unknown one.
var wrkNumber = regexp.MustCompile(`[-+]?\d+(\.\d+)?([a-zA-Z]+)?%?|(^|\s)-($|\s)`)

// skeleton is a line's label structure: its figures replaced by N, the
// URL by URL, runs of spaces by one, and Phalanx's "agents" (its threads)
// by wrk's "threads".
func skeleton(line string) string {
	line = regexp.MustCompile(`@ \S+`).ReplaceAllString(line, "@ URL")
	line = strings.Replace(line, " agents and ", " threads and ", 1)
	line = strings.Replace(line, " agent and ", " threads and ", 1)
	line = wrkNumber.ReplaceAllStringFunc(line, func(m string) string {
		if strings.TrimSpace(m) == "-" {
			return " N "
		}
		if strings.HasSuffix(m, "%") {
			return "N%"
		}
		return "N"
	})
	return strings.Join(strings.Fields(line), " ")
}

// columns returns where each figure's digits end in line: wrk's
// print_units aligns a column on its digits whatever the unit.
func columns(line string) []int {
	var out []int
	for _, m := range regexp.MustCompile(`\d+(\.\d+)?|(^|\s)-($|\s)`).FindAllStringIndex(line, -1) {
		end := m[1]
		if strings.TrimSpace(line[m[0]:m[1]]) == "-" {
			end = m[0] + strings.Index(line[m[0]:m[1]], "-") + 1
		}
		out = append(out, end)
	}
	return out
}

// fixedColumns are the labels whose figures sit in fixed columns in wrk
// (the tables and the two totals); the others carry figures of any width.
var fixedColumns = []string{"Thread Stats", "Latency ", "Req/Sec", "Requests/sec:", "Transfer/sec:", "%  "}

func isFixed(line string) bool {
	t := strings.TrimSpace(line)
	for _, p := range fixedColumns {
		if strings.HasPrefix(t, p) || (p == "%  " && regexp.MustCompile(`^\s+[\d.]+%\s`).MatchString(line)) {
			return true
		}
	}
	return false
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wrkBlock returns Phalanx's wrk block: from the first line to
// Transfer/sec, less the lines Phalanx adds by design (its notes after the
// header, and its finer error kinds under Socket errors).
func wrkBlock(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  Errors: ") {
			continue
		}
		out = append(out, l)
		if strings.HasPrefix(l, "Transfer/sec:") {
			break
		}
	}
	return out
}

// TestWrkLayoutMatchesRealWrk: every line of the golden text report's wrk
// block has the label structure of a real wrk --latency line, and the
// figures of wrk's fixed-column lines end in wrk's columns; every kind of
// line wrk printed is in the golden, in wrk's order.
func TestWrkLayoutMatchesRealWrk(t *testing.T) {
	wrk := map[string][]int{} // skeleton -> columns
	var captures [][]string   // each capture's skeletons, in order
	for _, name := range wrkCaptures {
		var order []string
		for _, l := range readLines(t, filepath.Join("testdata", "wrk", name)) {
			sk := skeleton(l)
			if _, ok := wrk[sk]; !ok {
				wrk[sk] = columns(l)
			}
			if len(order) == 0 || order[len(order)-1] != sk {
				order = append(order, sk)
			}
		}
		captures = append(captures, order)
	}
	block := wrkBlock(readLines(t, filepath.Join("testdata", "report.txt")))
	var golden []string
	for _, l := range block {
		sk := skeleton(l)
		cols, ok := wrk[sk]
		if !ok {
			t.Errorf("line %q (%q) is none of wrk's", l, sk)
			continue
		}
		if len(golden) == 0 || golden[len(golden)-1] != sk {
			golden = append(golden, sk)
		}
		if got := columns(l); isFixed(l) && !equalInts(got, cols) {
			t.Errorf("line %q: figures end at columns %v, wrk's at %v", l, got, cols)
		}
	}
	// Each capture's lines, in its order, are the golden's lines of the
	// same kinds.
	for i, order := range captures {
		in := map[string]bool{}
		for _, sk := range order {
			in[sk] = true
		}
		var got []string
		for _, sk := range golden {
			if in[sk] {
				got = append(got, sk)
			}
		}
		if strings.Join(got, "\n") != strings.Join(order, "\n") {
			t.Errorf("wrk %s has the lines\n%s\nthe golden report, of those kinds,\n%s", wrkCaptures[i], strings.Join(order, "\n"), strings.Join(got, "\n"))
		}
	}
}

// wrkResult is what a script that parses wrk's output reads.
type wrkResult struct {
	threads, connections         int
	latencyAvg, latencyMax       string
	reqPerSecAvg                 string
	percentiles                  map[string]string
	requests                     int
	read                         string
	connect, read_, write, tmout int
	non2xx                       int
	rps                          float64
	transfer                     string
}

// parseWrk parses wrk's output the way the usual scripts do: a regular
// expression per line.
func parseWrk(text string) (wrkResult, bool) {
	r := wrkResult{percentiles: map[string]string{}}
	found := 0
	for _, l := range strings.Split(text, "\n") {
		if m := regexp.MustCompile(`^\s+(\d+) (?:threads|agents) and (\d+) connections$`).FindStringSubmatch(l); m != nil {
			r.threads, _ = strconv.Atoi(m[1])
			r.connections, _ = strconv.Atoi(m[2])
			found++
		}
		if m := regexp.MustCompile(`^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%$`).FindStringSubmatch(l); m != nil {
			r.latencyAvg, r.latencyMax = m[1], m[3]
			found++
		}
		if m := regexp.MustCompile(`^\s+Req/Sec\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%$`).FindStringSubmatch(l); m != nil {
			r.reqPerSecAvg = m[1]
			found++
		}
		if m := regexp.MustCompile(`^\s+([\d.]+)%\s+(\S+)$`).FindStringSubmatch(l); m != nil {
			r.percentiles[m[1]] = m[2]
		}
		if m := regexp.MustCompile(`^\s+(\d+) requests in (\S+), (\S+) read$`).FindStringSubmatch(l); m != nil {
			r.requests, _ = strconv.Atoi(m[1])
			r.read = m[3]
			found++
		}
		if m := regexp.MustCompile(`^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)$`).FindStringSubmatch(l); m != nil {
			r.connect, _ = strconv.Atoi(m[1])
			r.read_, _ = strconv.Atoi(m[2])
			r.write, _ = strconv.Atoi(m[3])
			r.tmout, _ = strconv.Atoi(m[4])
		}
		if m := regexp.MustCompile(`^\s+Non-2xx or 3xx responses: (\d+)$`).FindStringSubmatch(l); m != nil {
			r.non2xx, _ = strconv.Atoi(m[1])
		}
		if m := regexp.MustCompile(`^Requests/sec:\s+([\d.]+)$`).FindStringSubmatch(l); m != nil {
			r.rps, _ = strconv.ParseFloat(m[1], 64)
			found++
		}
		if m := regexp.MustCompile(`^Transfer/sec:\s+(\S+)$`).FindStringSubmatch(l); m != nil {
			r.transfer = m[1]
			found++
		}
	}
	return r, found == 6
}

// TestWrkParserReadsTextReport: the parser reads real wrk output, and
// reads Phalanx's golden text report to its figures.
func TestWrkParserReadsTextReport(t *testing.T) {
	for _, name := range wrkCaptures {
		b, err := os.ReadFile(filepath.Join("testdata", "wrk", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := parseWrk(string(b)); !ok {
			t.Errorf("the parser does not read real wrk output %s", name)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := parseWrk(string(b))
	if !ok {
		t.Fatalf("the wrk parser does not read the text report:\n%s", b)
	}
	want := wrkResult{
		threads: 2, connections: 4, latencyAvg: "500.50us", latencyMax: "1.00ms", reqPerSecAvg: "250.00",
		percentiles: map[string]string{"50": "500.00us", "75": "750.00us", "90": "900.00us", "99": "990.00us", "99.9": "999.00us", "99.99": "1.00ms"},
		requests:    1000, read: "1.00MB", connect: 0, read_: 2, write: 0, tmout: 1, non2xx: 10, rps: 500, transfer: "512.00KB",
	}
	if !equalWrk(got, want) {
		t.Errorf("parsed %+v\nwant %+v", got, want)
	}
}

func equalWrk(a, b wrkResult) bool {
	if len(a.percentiles) != len(b.percentiles) {
		return false
	}
	for k, v := range a.percentiles {
		if b.percentiles[k] != v {
			return false
		}
	}
	a.percentiles, b.percentiles = nil, nil
	return a.threads == b.threads && a.connections == b.connections && a.latencyAvg == b.latencyAvg &&
		a.latencyMax == b.latencyMax && a.reqPerSecAvg == b.reqPerSecAvg && a.requests == b.requests &&
		a.read == b.read && a.connect == b.connect && a.read_ == b.read_ && a.write == b.write &&
		a.tmout == b.tmout && a.non2xx == b.non2xx && a.rps == b.rps && a.transfer == b.transfer
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

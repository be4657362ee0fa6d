package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/compare"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestRunHTML runs a closed- and an open-loop 2-agent run with --html and
// --json: the page's data block holds the run's report (the JSON's
// requests, agents and timeline) and its interval histograms hold every
// response of the window: latency, and in open loop service time too.
func TestRunHTML(t *testing.T) {
	env := newTestEnv(t, 2)
	for _, load := range [][]string{{"-c4"}, {"-c4", "-R", "400"}} {
		t.Run(strings.Join(load, " "), func(t *testing.T) { testRunHTML(t, env, load) })
	}
}

func testRunHTML(t *testing.T, env *testEnv, load []string) {
	dir := t.TempDir()
	htmlFile, jsonFile := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json")
	args := append([]string{"--coordinator", env.coord, "run", "-d1", "--interval", "250ms", "--cacert", env.caFile,
		"--json", jsonFile, "--html", htmlFile}, load...)
	code, _, stderr := runCLI(append(args, env.url)...)
	if code != 0 {
		t.Fatalf("coordctl run --html: exit %d: %s", code, stderr)
	}
	var rep report.Report
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	const open = `<script type="application/json" id="phalanx-data">`
	s := string(page)
	i := strings.Index(s, open)
	if i < 0 {
		t.Fatalf("%s has no data block", htmlFile)
	}
	s = s[i+len(open):]
	var d report.HTMLData
	if err := json.Unmarshal([]byte(s[:strings.Index(s, "</script>")]), &d); err != nil {
		t.Fatalf("data block: %v", err)
	}
	if d.Run.RunID != rep.RunID || d.Run.Requests != rep.Requests || rep.Requests == 0 || len(d.Run.AgentRows) != 2 || len(d.Timeline.Requests) != len(rep.Timeline) {
		t.Fatalf("data block run %s, %d requests, %d agents, %d intervals; want the JSON report's %s, %d, 2, %d",
			d.Run.RunID, d.Run.Requests, len(d.Run.AgentRows), len(d.Timeline.Requests), rep.RunID, rep.Requests, len(rep.Timeline))
	}
	columns := map[string]string{"latency": d.Intervals.Latency}
	if rep.Mode == "open" {
		columns["service_time"] = d.Intervals.Service
	}
	for name, col := range columns {
		cols, err := report.DecodeHTMLIntervals(col)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var n int64
		for k, pairs := range cols {
			var in int64
			for j := 1; j < len(pairs); j += 2 {
				in += pairs[j]
			}
			if in != rep.Timeline[k].Requests {
				t.Errorf("interval %d: page %s histogram holds %d responses, the report %d", k, name, in, rep.Timeline[k].Requests)
			}
			n += in
		}
		if len(cols) != len(rep.Timeline) || n != rep.Requests {
			t.Errorf("page %s: %d interval histograms hold %d responses, want the report's %d and %d", name, len(cols), n, len(rep.Timeline), rep.Requests)
		}
	}
}

// TestRunHTMLStdout: --html - is a usage error (the page never goes to
// stdout), before any run.
func TestRunHTMLStdout(t *testing.T) {
	code, _, stderr := runCLI("--coordinator", "127.0.0.1:1", "run", "-c1", "-d1", "--html", "-", "https://127.0.0.1:1/")
	if code != 2 || !strings.Contains(stderr, "--html: give a file name") {
		t.Errorf("--html -: exit %d, %q; want a usage error naming --html", code, stderr)
	}
}

// TestReportFormatHTML renders a stored run (not finished: 2 intervals of
// 100 responses) as HTML: the page's data block holds its 200 requests and
// both intervals' histograms.
func TestReportFormatHTML(t *testing.T) {
	dir, id := storeWithRun(t)
	code, out, stderr := runCLI("report", "--data-dir", dir, "--format", "html", id)
	if code != 0 {
		t.Fatalf("report --format html: exit %d: %s", code, stderr)
	}
	d := pageData(t, out)
	cols, err := report.DecodeHTMLIntervals(d.Intervals.Latency)
	if err != nil {
		t.Fatal(err)
	}
	if d.Run.RunID != id || d.Run.Requests != 200 || !d.Run.Partial || len(cols) != 2 || len(cols[0]) != 2 || cols[0][1] != 100 {
		t.Errorf("data block: run %s, %d requests, partial %v, interval histograms %v; want %s, 200, partial, two of 100 at 500us",
			d.Run.RunID, d.Run.Requests, d.Run.Partial, cols, id)
	}
}

// pageData returns the data block of an HTML page.
func pageData(t *testing.T, page string) *report.HTMLData {
	t.Helper()
	const open = `<script type="application/json" id="phalanx-data">`
	i := strings.Index(page, open)
	if i < 0 || !strings.HasPrefix(page, "<!DOCTYPE html>") {
		t.Fatalf("no page with a data block:\n%.300s", page)
	}
	s := page[i+len(open):]
	var d report.HTMLData
	if err := json.Unmarshal([]byte(s[:strings.Index(s, "</script>")]), &d); err != nil {
		t.Fatalf("data block: %v", err)
	}
	return &d
}

// TestCompareHTML: coordctl compare --html writes the comparison's page
// (the "compare" view) beside the text table, its statistics rows the
// very lines the text prints, and both sides' runs, timeline and spectrum;
// a bad --html path is refused before any work, naming the flag.
func TestCompareHTML(t *testing.T) {
	dir, id := storeWithRunOf(t, compare.MinIntervals)
	page := filepath.Join(t.TempDir(), "compare.html")
	code, out, stderr := runCLI("compare", "--data-dir", dir, "--html", page, id, id)
	if code != 0 {
		t.Fatalf("compare --html: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	d := pageData(t, string(b))
	if d.View != "compare" || d.Compare == nil || d.Run != nil {
		t.Fatalf("view %q, compare %v: want the compare view alone", d.View, d.Compare != nil)
	}
	c := d.Compare
	lines := strings.Split(strings.TrimSpace(out), "\n")
	table := lines[len(lines)-len(c.Rows)-1:]
	if strings.Join(strings.Fields(table[0]), " ") != strings.Join(c.Header, " ") {
		t.Errorf("page header %v, text %q", c.Header, table[0])
	}
	for i, r := range c.Rows {
		if got, want := strings.Fields(table[i+1]), strings.Fields(strings.Join(r.Cells, " ")); !slices.Equal(got, want) {
			t.Errorf("row %d: page %v, text %q", i, r.Cells, table[i+1])
		}
	}
	for _, s := range []report.CompareSide{c.Baseline, c.Candidate} {
		if len(s.Runs) != 1 || s.Runs[0].RunID != id || len(s.Timeline.P99Us) != compare.MinIntervals || s.Timeline.RPS[0] == 0 || len(s.Spectra.Latency) == 0 {
			t.Errorf("side %s: runs %+v, timeline %+v, %d spectrum pairs", s.Label, s.Runs, s.Timeline, len(s.Spectra.Latency)/2)
		}
	}
	if len(c.Rows) == 0 || c.Method != "bootstrap (intervals resampled)" {
		t.Errorf("%d rows, method %q", len(c.Rows), c.Method)
	}
	code, _, stderr = runCLI("compare", "--data-dir", dir, "--html", filepath.Join(t.TempDir(), "no", "such", "dir.html"), id, id)
	if code != 2 || !strings.Contains(stderr, "--html") {
		t.Errorf("compare --html into a missing directory: exit %d, %q; want a usage error naming --html", code, stderr)
	}
}

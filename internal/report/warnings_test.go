package report_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestAllErrorStatusWarning: a run whose every response is outside
// 200-399 (the README's brotli example against a stock NGINX: all 404)
// has a warning naming the codes right after its header (as the live run,
// which prints the header at the start); one success among them, or no
// response and no error, gives none.
func TestAllErrorStatusWarning(t *testing.T) {
	text := func(r *report.Report) string {
		t.Helper()
		var b bytes.Buffer
		if err := r.WriteText(&b, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	n := r.Requests
	if n < 3 {
		t.Fatalf("the fixture has %d requests", n)
	}
	r.Status, r.Non2xx3xx = map[string]int64{"404": n - 1, "503": 1}, n
	want := "WARNING: every response (" + itoa(n) + ") had a status outside 200-399 (404 ×" + itoa(n-1) + ", 503 ×1): the figures below measure error responses; check the URL, the Host header and the server\n"
	if lines := strings.SplitAfterN(text(r), "\n", 4); len(lines) < 4 || !strings.HasPrefix(lines[0], "Running ") || lines[2] != want {
		t.Errorf("all 404 and 503: the report's third line is not %q, after the header:\n%s", want, strings.Join(lines, ""))
	}
	var live bytes.Buffer
	if err := r.WriteText(&live, report.TextOptions{NoHeader: true}); err != nil || !strings.HasPrefix(live.String(), want) {
		t.Errorf("without the header (the live run printed it): does not start with %q:\n%s", want, live.String())
	}
	r.Status, r.Non2xx3xx = map[string]int64{"404": n - 1, "200": 1}, n-1
	if got := text(r); strings.Contains(got, "WARNING") {
		t.Errorf("one 200 among 404s: a warning:\n%s", got)
	}
	r.Requests, r.Status, r.Non2xx3xx, r.Errors = 0, map[string]int64{}, 0, map[string]int64{}
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("no response and no error: Warnings() = %q, want none", w)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestNoRequestCompletedWarning: a run in which every request failed
// warns with the count and the kinds; all truncated or protocol errors
// on http:// sent as HTTP/1.1 add the h2c hint, and nothing else does.
func TestNoRequestCompletedWarning(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Requests, r.Status, r.Non2xx3xx, r.MaxStreams = 0, map[string]int64{}, 0, 0
	r.Target = "http://127.0.0.1:8080/"
	for _, c := range []struct {
		errs   map[string]int64
		target string
		h2     int32
		want   string
	}{
		{map[string]int64{"closed": 7, "reset": 2}, "http://127.0.0.1:8080/", 0, "no request completed: 9 errors (closed ×7, reset ×2): every figure below is of failures"},
		{map[string]int64{"truncated": 5, "protocol": 1}, "http://127.0.0.1:8080/", 0, "no request completed: 6 errors (truncated ×5, protocol ×1): every figure below is of failures; the server may speak only HTTP/2 (h2c): try --http2"},
		{map[string]int64{"truncated": 5}, "https://127.0.0.1:8443/", 0, "no request completed: 5 errors (truncated ×5): every figure below is of failures"},
		{map[string]int64{"protocol": 5}, "http://127.0.0.1:8080/", 100, "no request completed: 5 errors (protocol ×5): every figure below is of failures"},
		{map[string]int64{"truncated": 5, "closed": 1}, "http://127.0.0.1:8080/", 0, "no request completed: 6 errors (truncated ×5, closed ×1): every figure below is of failures"},
	} {
		r.Errors, r.Target, r.MaxStreams = c.errs, c.target, c.h2
		if w := r.Warnings(); len(w) != 1 || w[0] != c.want {
			t.Errorf("errors %v on %s (max streams %d): Warnings() = %q, want %q", c.errs, c.target, c.h2, w, c.want)
		}
	}
	r.Requests = 1
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("one response among the errors: Warnings() = %q, want none", w)
	}
}

// TestRunIDNotStored: a report of a run no store keeps says so after its
// run ID, in the text and h2load layouts; a stored one does not.
func TestRunIDNotStored(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, notStored := range []bool{false, true} {
		r.NotStored = notStored
		var text, h2 bytes.Buffer
		if err := r.WriteText(&text, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteH2load(&h2); err != nil {
			t.Fatal(err)
		}
		want := "Run ID: " + r.RunID + "\n"
		if notStored {
			want = "Run ID: " + r.RunID + " (not stored)\n"
		}
		for name, out := range map[string]string{"text": text.String(), "h2load": h2.String()} {
			if !strings.Contains(out, want) {
				t.Errorf("not stored %v: the %s report lacks %q:\n%s", notStored, name, want, out)
			}
		}
	}
}

// TestShortWindowWarning: the fresh-user trial's ab runs (4 connections on
// a 100 ms server, 1 s windows, no warm-up: 36 completed of a steady 40)
// warn that the RPS undercounts by up to the latency's share of the
// window; a warm-up, nothing in flight, or a latency under 1 % of the
// window gives none.
func TestShortWindowWarning(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Warmup, r.Requests, r.InFlight, r.DurationS = nil, 36, 4, 1
	r.Latency.Mean = 100_000
	want := "the mean latency (100.00ms) is 10.0 % of the 1.00s window and there was no warm-up: each connection's first response came a latency after the start, and 4 requests were in flight at the end, so the RPS (completed requests / window) undercounts the steady rate by up to about 10.0 %; give a longer -d or a --warmup"
	if w := r.Warnings(); !slices.Contains(w, want) {
		t.Errorf("Warnings() = %q, want %q", w, want)
	}
	for name, change := range map[string]func(*report.Report){
		"warm-up":        func(r *report.Report) { r.Warmup = &report.Warmup{} },
		"none in flight": func(r *report.Report) { r.InFlight = 0 },
		"5 ms over 1 s":  func(r *report.Report) { r.Latency.Mean = 5000 },
	} {
		c := *r
		lat := *r.Latency
		c.Latency = &lat
		change(&c)
		for _, w := range c.Warnings() {
			if strings.Contains(w, "undercounts") {
				t.Errorf("%s: warned %q", name, w)
			}
		}
	}
}

// TestUnsentWarning: an open loop that left 1 % or more of its scheduled
// sends unsent warns that its percentiles are lower bounds; fewer, or a
// closed loop, does not.
func TestUnsentWarning(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Mode, r.Issued, r.Unsent, r.Carried = "open", 571, 291, 0
	want := "291 of the 862 scheduled sends (33.8 %) never left (every connection busy until the window's end): no percentile holds them, and each would have taken at least its wait to the window's end, so the latency percentiles are lower bounds"
	if w := r.Warnings(); !slices.Contains(w, want) {
		t.Errorf("Warnings() = %q, want %q", w, want)
	}
	for name, change := range map[string]func(*report.Report){
		"closed loop": func(r *report.Report) { r.Mode = "closed" },
		"under 1 %":   func(r *report.Report) { r.Unsent = 5 },
		"none unsent": func(r *report.Report) { r.Unsent = 0 },
	} {
		c := *r
		change(&c)
		for _, w := range c.Warnings() {
			if strings.Contains(w, "never left") {
				t.Errorf("%s: warned %q", name, w)
			}
		}
	}
}

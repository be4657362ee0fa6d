package report_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestAllErrorStatusWarning: a run whose every response is outside
// 200-399 (the README's brotli example against a stock NGINX: all 404)
// starts its text report with a warning naming the codes; one success
// among them, or no response at all, gives none.
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
	want := "WARNING: every response (" + itoa(n) + ") had a status outside 200-399 (404 ×" + itoa(n-1) + ", 503 ×1): the figures below measure error responses; check the URL, the Host header and the server\nRunning "
	if got := text(r); !strings.HasPrefix(got, want) {
		t.Errorf("all 404 and 503: the report does not start with %q:\n%s", want, got)
	}
	r.Status, r.Non2xx3xx = map[string]int64{"404": n - 1, "200": 1}, n-1
	if got := text(r); strings.Contains(got, "WARNING") {
		t.Errorf("one 200 among 404s: a warning:\n%s", got)
	}
	r.Requests, r.Status, r.Non2xx3xx = 0, map[string]int64{}, 0
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("no response: Warnings() = %q, want none", w)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestTextSingular: counts of one are singular in the text report (one
// stream, retry, redirect, request in flight, error); two are plural.
func TestTextSingular(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	text := func() string {
		t.Helper()
		var b bytes.Buffer
		if err := r.WriteText(&b, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r.MaxStreams, r.Retries, r.Redirects, r.InFlight = 1, 1, 1, 1
	out := text()
	for _, want := range []string{"HTTP/2, 1 concurrent stream per connection", "; 1 retry", "; 1 redirect followed", "In flight:    1 request when"} {
		if !strings.Contains(out, want) {
			t.Errorf("counts of 1: the report lacks %q:\n%s", want, out)
		}
	}
	r.MaxStreams, r.Retries, r.Redirects, r.InFlight = 2, 2, 2, 2
	out = text()
	for _, want := range []string{"HTTP/2, 2 concurrent streams per connection", "; 2 retries", "; 2 redirects followed", "In flight:    2 requests when"} {
		if !strings.Contains(out, want) {
			t.Errorf("counts of 2: the report lacks %q:\n%s", want, out)
		}
	}
	r.Requests, r.Errors = 0, map[string]int64{"reset": 1}
	if w := r.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "no request completed: 1 error (reset ×1)") {
		t.Errorf("one error: Warnings() = %q", w)
	}
}

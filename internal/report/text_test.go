package report_test

import (
	"bytes"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestGoldenText compares the text rendering (with the latency
// distribution) with testdata/report.txt; -update rewrites it.
func TestGoldenText(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{Latency: true}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", text.Bytes())
}

// TestGoldenTextOpen compares an open-loop run's text rendering (service
// time and send lateness among the phases) with testdata/report_open.txt;
// -update rewrites it.
func TestGoldenTextOpen(t *testing.T) {
	r, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_open.txt", text.Bytes())
}

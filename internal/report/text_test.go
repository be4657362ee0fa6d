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

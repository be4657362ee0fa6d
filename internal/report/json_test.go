package report_test

import (
	"bytes"
	"testing"

	"github.com/phalanxload/phalanx/internal/wire"
)

// TestGoldenJSON compares the JSON rendering with testdata/report.json;
// -update rewrites it.
func TestGoldenJSON(t *testing.T) {
	r, err := wire.ReportFromResult(result(t))
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", js.Bytes())
}

// TestGoldenJSONOpen compares an open-loop run's JSON (send_lateness_us,
// the timeline's lateness_p99_us) with testdata/report_open.json; -update
// rewrites it.
func TestGoldenJSONOpen(t *testing.T) {
	r, err := wire.ReportFromResult(openResult(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_open.json", js.Bytes())
}

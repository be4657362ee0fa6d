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

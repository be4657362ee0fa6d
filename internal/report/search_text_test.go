package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
)

// TestSearchStatesPacing: a search whose steps were paced in windows or
// with the spin says so in its text header and its JSON; one paced
// precisely says neither.
func TestSearchStatesPacing(t *testing.T) {
	s := &report.Search{SearchID: "search-1", URL: "https://127.0.0.1:8443/", Mode: "open", Unit: "requests/s", SLOs: []string{"p99<3ms"},
		Outcome: "stopped", Message: "--max-steps", Steps: []report.SearchStep{}, Curve: []report.SearchCurvePt{}}
	header := func() (string, string) {
		var text, js bytes.Buffer
		if err := report.WriteSearchText(&text, s); err != nil {
			t.Fatal(err)
		}
		if err := report.WriteSearchJSON(&js, s); err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(text.String(), "\n")
		return first, js.String()
	}
	first, js := header()
	if want := "(open loop, requests/s), SLO p99<3ms"; !strings.Contains(first, want) || strings.Contains(js, "pacing") {
		t.Errorf("precise search: header %q (want %q), JSON %s (want no pacing field)", first, want, js)
	}
	s.PacingWindowUs, s.PacingSpin = 1000, true
	first, js = header()
	var got struct {
		Window int64 `json:"pacing_window_us"`
		Spin   bool  `json:"pacing_spin"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatal(err)
	}
	if want := "(open loop, requests/s, paced in 1ms windows, paced with a spin), SLO"; !strings.Contains(first, want) || got.Window != 1000 || !got.Spin {
		t.Errorf("paced search: header %q (want %q), JSON window %d spin %v (want 1000, true)", first, want, got.Window, got.Spin)
	}
}

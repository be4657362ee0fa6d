package report

import "testing"

func TestFmtWindow(t *testing.T) {
	for s, want := range map[float64]string{2: "2s", 1.784512004: "1.78s", 0.25: "250ms", 60: "1m", 90: "1m30s", 3600: "1h", 5400: "1h30m"} {
		if got := fmtWindow(s); got != want {
			t.Errorf("fmtWindow(%v) = %q, want %q", s, got, want)
		}
	}
}

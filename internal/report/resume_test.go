package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestResumeRatioKeepAlive: --resume-ratio 0.5 on a keep-alive closed
// loop, whose 10 handshakes are each a connection's first (no reconnect:
// nothing offered), reports 0 of 10 offered, not "50 % offered", in the
// text and the JSON (resume_ratio_offered 0, the plan's 0.5 apart), with
// a warning that only reconnects can resume; a run whose handshakes
// offered as planned gets no warning.
func TestResumeRatioKeepAlive(t *testing.T) {
	res := result(t)
	res.Plan.Tls = &pb.TLSOptions{Resume: true, ResumeRatio: 0.5}
	res.Counters.HandshakesFull, res.Counters.HandshakesResumed, res.Counters.HandshakesRefused = 10, 0, 0
	text, js := renderTextJSON(t, res)
	for _, want := range []string{
		"TLS handshakes: 10 full, 0 resumed (resumed 0.0 %; offered a session 0 of 10, 0.0 %, against --resume-ratio 0.5)",
		"WARNING: --resume-ratio 0.5: only 0 of 10 handshakes offered a session",
		"only reconnects can resume",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "50 % offered") {
		t.Errorf("text claims 50 %% offered:\n%s", text.String())
	}
	var got struct {
		Handshakes struct {
			Offered int64    `json:"offered"`
			Planned float64  `json:"resume_ratio_planned"`
			Ratio   *float64 `json:"resume_ratio_offered"`
		} `json:"handshakes"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if h := got.Handshakes; h.Offered != 0 || h.Planned != 0.5 || h.Ratio == nil || *h.Ratio != 0 {
		t.Errorf("JSON handshakes offered %d, planned %v, offered ratio %v; want 0, 0.5, 0", h.Offered, h.Planned, h.Ratio)
	}

	// 6 of 10 offered (5 resumed, 1 refused): as planned, no warning.
	res.Counters.HandshakesFull, res.Counters.HandshakesResumed, res.Counters.HandshakesRefused = 5, 5, 1
	text, _ = renderTextJSON(t, res)
	if want := "(resumed 50.0 %; offered a session 6 of 10, 60.0 %, against --resume-ratio 0.5)"; !strings.Contains(text.String(), want) || strings.Contains(text.String(), "--resume-ratio 0.5: only") {
		t.Errorf("text lacks %q or warns:\n%s", want, text.String())
	}
}

// TestEarlyDataCounts: 0-RTT offered and accepted counts travel from an
// agent's counters to the text's connections line and the JSON, the
// rejected ones their difference; counters with more accepted than
// offered are refused.
func TestEarlyDataCounts(t *testing.T) {
	res := result(t)
	res.Plan.Tls = &pb.TLSOptions{Resume: true, EarlyData: true}
	res.Counters.HandshakesFull, res.Counters.HandshakesResumed = 2, 8
	res.Counters.HandshakesEarlyOffered, res.Counters.HandshakesEarlyAccepted = 8, 5
	text, js := renderTextJSON(t, res)
	if want := "TLS handshakes: 2 full, 8 resumed; 0-RTT: 8 offered, 5 accepted, 3 rejected"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
	var got struct {
		Handshakes struct {
			Offered  int64 `json:"early_offered"`
			Accepted int64 `json:"early_accepted"`
			Rejected int64 `json:"early_rejected"`
		} `json:"handshakes"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if h := got.Handshakes; h.Offered != 8 || h.Accepted != 5 || h.Rejected != 3 {
		t.Errorf("JSON 0-RTT %d offered, %d accepted, %d rejected; want 8, 5, 3", h.Offered, h.Accepted, h.Rejected)
	}
	res.Counters.HandshakesEarlyAccepted = 9
	if _, err := wire.ReportFromResult(res); err == nil || !strings.Contains(err.Error(), "handshakes_early_accepted") {
		t.Errorf("9 accepted of 8 offered: %v, want an error naming handshakes_early_accepted", err)
	}
}

// renderTextJSON renders res's report as text and JSON.
func renderTextJSON(t *testing.T, res *pb.RunResult) (text, js *bytes.Buffer) {
	t.Helper()
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	text, js = &bytes.Buffer{}, &bytes.Buffer{}
	if err := r.WriteText(text, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(js); err != nil {
		t.Fatal(err)
	}
	return text, js
}

package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestTextHTTP3: an HTTP/3 run's report says so after the header, and its
// TLS line names the QUIC version before TLS's parameters and ALPN h3.
func TestTextHTTP3(t *testing.T) {
	res := result(t)
	res.Plan.Protocol = pb.Protocol_PROTOCOL_HTTP3
	res.Counters.HandshakesFull = 4
	res.Counters.Tls = map[string]int64{"transport:QUIC v1": 4, "version:TLS 1.3": 4, "cipher:TLS_AES_128_GCM_SHA256": 4, "group:X25519": 4, "alpn:h3": 4}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  HTTP/3 over QUIC, 1 request at a time per connection\n",
		"TLS:          QUIC v1 (4); TLS 1.3 (4); TLS_AES_128_GCM_SHA256 (4); X25519 (4); ALPN h3 (4) (connections)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the HTTP/3 report lacks %q:\n%s", want, out)
		}
	}
	if !r.HTTP3 || r.TLS.Transport["QUIC v1"] != 4 {
		t.Errorf("report: http3 %v, transport %v", r.HTTP3, r.TLS.Transport)
	}
}

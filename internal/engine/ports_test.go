package engine

import (
	"net"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/measure"
)

// TestPortsErrorKind: a connect whose local address cannot be bound
// (EADDRNOTAVAIL, here from an address this host lacks, TEST-NET-1, as
// from used-up ephemeral ports) is a ports error, told apart from the
// other local failures, and its message says what to do.
func TestPortsErrorKind(t *testing.T) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1")}}
	_, err := d.Dial("tcp", "127.0.0.1:1")
	if err == nil {
		t.Fatal("dial from 192.0.2.1 succeeded")
	}
	if k := classifyDial(err, false); k != measure.ErrPorts || k.String() != "ports" {
		t.Fatalf("classifyDial(%v) = %v, want ports", err, k)
	}
	if k, err := measure.ParseErrorKind("ports"); err != nil || k != measure.ErrPorts {
		t.Errorf("ParseErrorKind(ports) = %v, %v", k, err)
	}
	if !strings.Contains(measure.PortsAdvice, "--source-ips") || !strings.Contains(measure.PortsAdvice, "--close rst") || !strings.Contains(measure.PortsAdvice, "tcp_tw_reuse") {
		t.Errorf("PortsAdvice %q lacks the remedies", measure.PortsAdvice)
	}
}

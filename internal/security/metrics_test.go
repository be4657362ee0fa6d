package security_test

import (
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
)

// TestCheckMetrics: /metrics on the network needs mutual TLS or
// --insecure-cluster (then a warning); on loopback, or with mutual TLS,
// anything goes; a malformed address names the flag.
func TestCheckMetrics(t *testing.T) {
	tlsCfg := securitytest.New(t).Config(t, security.RoleCoordinator)
	for _, c := range []struct {
		cfg             security.Config
		addr            string
		wantErr, wantWa string
	}{
		{security.Config{}, "127.0.0.1:9100", "", ""},
		{security.Config{}, "localhost:9100", "", ""},
		{security.Config{}, "[::1]:9100", "", ""},
		{security.Config{}, "0.0.0.0:9100", "--metrics-addr 0.0.0.0:9100 is not a loopback address: /metrics on the network needs mutual TLS", ""},
		{security.Config{}, ":9100", "is not a loopback address", ""},
		{security.Config{InsecureCluster: true}, "10.0.0.1:9100", "", "insecure cluster (--insecure-cluster): --metrics-addr 10.0.0.1:9100 serves /metrics in plaintext"},
		{tlsCfg, "0.0.0.0:9100", "", ""},
		{security.Config{}, "9100", "--metrics-addr \"9100\"", ""},
	} {
		warning, err := c.cfg.CheckMetrics(c.addr)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("CheckMetrics(%q) mode %v: %v", c.addr, c.cfg.Mode, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("CheckMetrics(%q) mode %v: error %v, want %q", c.addr, c.cfg.Mode, err, c.wantErr)
		case !strings.Contains(warning, c.wantWa) || (c.wantWa == "") != (warning == ""):
			t.Errorf("CheckMetrics(%q) mode %v: warning %q, want %q", c.addr, c.cfg.Mode, warning, c.wantWa)
		}
	}
}

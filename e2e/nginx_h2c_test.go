package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestNginxH2CPriorKnowledge: --http2 on an http:// URL speaks h2c with
// prior knowledge to NGINX's cleartext HTTP/2 listener ("listen ...
// http2" without ssl: h2c prior knowledge since NGINX 1.9.5), as h2load
// does. Every request is one NGINX access-log line of protocol HTTP/2.0
// without TLS, and the report's count is NGINX's.
func TestNginxH2CPriorKnowledge(t *testing.T) {
	const n = 2000
	port := freePorts(t, 1)[0]
	srv := nginxtest.Start(t, nginxtest.Options{Server: fmt.Sprintf("        listen 127.0.0.1:%d http2;\n", port)})
	out := runCase(t, plan.Plan{
		URL: "http://" + loopback(port) + "/", Protocol: plan.H2, MaxStreams: 8, Connections: 4, Requests: n, Timeout: 5 * time.Second,
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	protocols := map[string]int{}
	for _, l := range lines {
		protocols[l.Protocol+" "+l.TLSProtocol]++
	}
	t.Logf("report: %d requests, errors %v, %d connections, streams %d; nginx: %d lines %v", rep.Requests, rep.Errors, rep.ConnectionsOpened, rep.MaxStreams, len(lines), protocols)
	if rep.Requests != n || rep.ErrorTotal() != 0 || rep.Status["200"] != n {
		t.Errorf("report: %d requests, status %v, errors %v; want %d x 200", rep.Requests, rep.Status, rep.Errors, n)
	}
	if len(lines) != n || protocols["HTTP/2.0 -"] != n {
		t.Errorf("nginx logged %d lines by protocol and TLS %v; want %d HTTP/2.0 without TLS", len(lines), protocols, n)
	}
	if rep.MaxStreams != 8 {
		t.Errorf("effective streams %d, want 8", rep.MaxStreams)
	}
}

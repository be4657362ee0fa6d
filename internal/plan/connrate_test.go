package plan

import (
	"strings"
	"testing"
	"time"
)

// TestConnectionRateFile: a plan file's connection-rate keys set the
// plan's fields as coordctl's flags do, stages ramp cps, and the defaults
// are the flags' (one request per connection; max_open the larger of
// connections and the highest cps).
func TestConnectionRateFile(t *testing.T) {
	p, err := ParseFile([]byte(`url: https://127.0.0.1/
cps: 200
connections: 4
requests_per_connection: 0
max_open: 50
close: rst
source_ips: [127.0.0.2, 127.0.0.3]
tls: {resume_ratio: 0.7}
stages:
  - {duration: 2s, cps: 500}
  - {duration: 1s, cps: 500}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ConnectionRate || p.Rate != 200 || p.RequestsPerConnection != 0 || p.MaxConnections != 50 || !p.CloseReset ||
		len(p.SourceIPs) != 2 || p.SourceIPs[1] != "127.0.0.3" || !p.TLS.Resume || p.TLS.ResumeRatio != 0.7 ||
		len(p.Stages) != 2 || p.Stages[0].Rate != 500 || p.Stages[0].Duration != 2*time.Second || p.Load != OpenLoop {
		t.Fatalf("ParseFile = %+v", p)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}

	// Defaults: one request per connection, FIN, max_open from the
	// highest stage cps; a first stage may ramp from no cps.
	p, err = ParseFile([]byte("url: https://127.0.0.1/\nconnections: 4\nstages:\n  - {duration: 2s, cps: 300}\n  - {duration: 1s, cps: 100}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if !p.ConnectionRate || p.Rate != 0 || p.RequestsPerConnection != 1 || p.MaxConnections != 300 || p.CloseReset || p.Load != OpenLoop {
		t.Errorf("staged cps plan: %+v; want a connection rate of 1 request per connection, max open 300, FIN", p)
	}
	// A request-rate plan keeps max_connections' default: connections.
	p, err = ParseFile([]byte("url: https://127.0.0.1/\nrate: 500\nconnections: 4\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetDefaults()
	if p.ConnectionRate || p.MaxConnections != 4 || p.RequestsPerConnection != 0 {
		t.Errorf("rate plan: connection rate %v, max connections %d, requests per connection %d", p.ConnectionRate, p.MaxConnections, p.RequestsPerConnection)
	}
}

// TestConnectionRateFileErrors: a bad connection-rate key is an error
// naming it (and its line, for a value of the wrong kind), never ignored.
func TestConnectionRateFileErrors(t *testing.T) {
	const u = "url: https://127.0.0.1/\n"
	for _, tc := range []struct{ in, want string }{
		{u + "cps: 100\nrate: 100\n", "rate = 100: a connection-rate plan (cps) has no request rate: choose cps"},
		{u + "cps: -5\n", "cps = -5: want a rate above 0 new connections/s"},
		{u + "cps: 100\nstages:\n  - {duration: 1s, rate: 200}\n", "stages[0].rate = 200: a connection-rate plan (cps) ramps cps, not rate"},
		{u + "rate: 100\nstages:\n  - {duration: 1s, cps: 200}\n", "rate = 100: a connection-rate plan (cps) has no request rate"},
		{u + "cps: 100\nstages:\n  - {duration: 1s, cps: -1}\n", "stages[0].cps = -1: want 0 or more new connections/s"},
		{u + "requests_per_connection: 0\n", "requests_per_connection = 0: only with cps"},
		{u + "rate: 100\nmax_open: 10\n", "max_open = 10: only with cps; a request-rate plan caps its connections with max_connections"},
		{u + "cps: 100\nmax_open: 10\nmax_connections: 20\n", "max_open = 10: max_connections is set too: choose one"},
		{u + "cps: 100\nmax_open: -1\n", "max_open = -1: want the connections open at once"},
		{u + "close: reset\n", `close = "reset": want fin (the default) or rst`},
		{u + "cps: many\n", `line 2: cps "many": not a number`},
		{u + "tls: {resume_ratio: most}\n", `line 2: tls.resume_ratio "most": not a number`},
		{u + "resume_ratio: 0.5\n", `line 2: unknown field "resume_ratio"; did you mean "tls.resume_ratio"?`},
		{u + "stages:\n  - {duration: 1s, cpss: 5}\n", `line 3: unknown field "cpss"; did you mean "cps"?`},
	} {
		_, err := ParseFile([]byte(tc.in), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFile(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	// Values Validate refuses name the file's keys too.
	for _, tc := range []struct{ in, want string }{
		{u + "cps: 100\nrequests_per_connection: -1\n", "requests_per_connection = -1: want 0 (the handshake only) or more"},
		{u + "cps: 100\nhttp2: true\n", "cps = set: a connection rate runs HTTP/1.1 and HTTP/3 only"},
		{u + "tls: {resume_ratio: 1.5}\n", "tls.resume_ratio = 1.5: want a fraction from 0 to 1"},
		{u + "source_ips: [host.example]\n", `source_ips = host.example: want an IP address`},
		{u + "cps: 100\nkeepalive: false\n", "keepalive = false: a connection-rate plan already opens a connection per ticket"},
	} {
		p, err := ParseFile([]byte(tc.in), nil)
		if err != nil {
			t.Errorf("ParseFile(%q) = %v", tc.in, err)
			continue
		}
		p.SetDefaults()
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

package plan

import (
	"strings"
	"testing"
)

func TestHTTP3File(t *testing.T) {
	p, err := ParseFile([]byte("url: https://127.0.0.1:8443/\nhttp3: true\n"), nil)
	if err != nil || p.Protocol != H3 {
		t.Fatalf("ParseFile(http3: true) = protocol %v, %v; want h3", p.Protocol, err)
	}
	if _, err := ParseFile([]byte("url: https://127.0.0.1:8443/\nhttp2: true\nhttp3: true\n"), nil); err == nil || !strings.Contains(err.Error(), "choose one of http2 and http3") {
		t.Errorf("ParseFile(http2 and http3) = %v, want both refused", err)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Errorf("Validate(h3 plan) = %v", err)
	}
}

func TestHTTP3Validate(t *testing.T) {
	for _, tc := range []struct {
		edit func(p *Plan)
		want string
	}{
		{func(p *Plan) { p.URL = "http://127.0.0.1/" }, "url = \"http://127.0.0.1/\": http3 runs over QUIC, which always uses TLS"},
		{func(p *Plan) { p.TLS.MaxVersion = "1.2" }, "tls.max_version = 1.2: QUIC uses TLS 1.3 only"},
		{func(p *Plan) { p.TLS.Ciphers = []string{"ECDHE-RSA-AES128-GCM-SHA256"} }, "tls.ciphers = ECDHE-RSA-AES128-GCM-SHA256: QUIC uses TLS 1.3"},
		{func(p *Plan) { p.TLS.ALPN = []string{"h2"} }, "tls.alpn = h2: http3 needs h3"},
		{func(p *Plan) { p.CloseReset = true }, "close = rst: a QUIC connection has no TCP reset"},
		{func(p *Plan) { p.TLS.EarlyData = true }, "tls.early_data = true: 0-RTT needs a session to resume"},
		{func(p *Plan) { p.TLS.EarlyData, p.TLS.Resume, p.Protocol = true, true, H2 }, "tls.early_data = true: 0-RTT early data is sent only over HTTP/3"},
		{func(p *Plan) { p.TLS.EarlyData, p.TLS.Resume, p.Method = true, true, "POST" }, "only GET and HEAD requests, not POST"},
		{func(p *Plan) {
			p.TLS.EarlyData, p.TLS.Resume, p.Mix = true, true, []Request{{URL: "https://127.0.0.1/a", Method: "HEAD"}, {URL: "https://127.0.0.1/b", Method: "DELETE"}}
		}, "only GET and HEAD requests, not DELETE"},
		{func(p *Plan) { p.Protocol = H2; p.Load, p.Rate, p.ConnectionRate = OpenLoop, 10, true }, "a connection rate runs HTTP/1.1 and HTTP/3 only"},
		{func(p *Plan) {
			p.Load, p.Rate, p.ConnectionRate, p.RequestsPerConnection, p.MaxStreams = OpenLoop, 10, true, 2, 4
		},
			"max_streams = 4: a connection-rate connection sends its requests one after another"},
	} {
		p := Plan{URL: "https://127.0.0.1/", Protocol: H3}
		tc.edit(&p)
		p.SetDefaults()
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
	for _, edit := range []func(p *Plan){
		func(p *Plan) { p.MaxStreams = 8 },
		func(p *Plan) { p.MaxStreams, p.Load, p.Rate, p.Connections, p.MaxConnections = 4, OpenLoop, 100, 2, 8 },
		func(p *Plan) { p.MaxRedirects = 2 },
		func(p *Plan) { p.TLS.EarlyData, p.TLS.Resume, p.Method = true, true, "HEAD" },
	} {
		p := Plan{URL: "https://127.0.0.1/", Protocol: H3}
		edit(&p)
		p.SetDefaults()
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(h3, max_streams %d, load %v, max_redirects %d) = %v, want it accepted", p.MaxStreams, p.Load, p.MaxRedirects, err)
		}
	}
	ok := Plan{URL: "https://127.0.0.1/", Protocol: H3, Load: OpenLoop, Rate: 10, ConnectionRate: true, RequestsPerConnection: 1, TLS: TLS{Resume: true, ResumeRatio: 0.5}}
	ok.SetDefaults()
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(h3 connection rate with resumption) = %v", err)
	}
}

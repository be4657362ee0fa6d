package plan

import (
	"strings"
	"testing"
)

// TestIneffectiveCombinations: an option the others make useless is
// refused, naming it and why; the same options alone are accepted.
func TestIneffectiveCombinations(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string // "" for valid
	}{
		{"ciphers with TLS 1.3 only", func(p *Plan) { p.TLS.MinVersion, p.TLS.Ciphers = "1.3", []string{"ECDHE-RSA-AES128-GCM-SHA256"} },
			"tls.ciphers = ECDHE-RSA-AES128-GCM-SHA256: cipher suites do nothing when TLS 1.3 is the lowest version"},
		{"ciphers with TLS 1.2", func(p *Plan) { p.TLS.MinVersion, p.TLS.Ciphers = "1.2", []string{"ECDHE-RSA-AES128-GCM-SHA256"} }, ""},
		{"ML-KEM with TLS 1.2 at most", func(p *Plan) { p.TLS.MaxVersion, p.TLS.Curves = "1.2", []string{"X25519", "X25519MLKEM768"} },
			"tls.curves = X25519MLKEM768: X25519MLKEM768 is a TLS 1.3 group"},
		{"ML-KEM with TLS 1.3", func(p *Plan) { p.TLS.Curves = []string{"X25519MLKEM768"} }, ""},
		{"CA with insecure", func(p *Plan) { p.TLS.Insecure, p.TLS.CAPEM = true, []byte("pem") }, "tls.ca_file = : a CA does nothing when certificate verification is off"},
		{"insecure alone", func(p *Plan) { p.TLS.Insecure = true }, ""},
		{"resolver with an IP URL", func(p *Plan) { p.Resolver = "127.0.0.1:53" }, `resolver = "127.0.0.1:53": nothing to resolve`},
		{"resolver with an IP connect_to", func(p *Plan) { p.URL, p.Resolver, p.ConnectTo = "https://a.example/", "127.0.0.1:53", "[::1]:443" }, "the address dialled, ::1, is an IP address"},
		{"resolver with a name", func(p *Plan) { p.URL, p.Resolver = "https://a.example/", "127.0.0.1:53" }, ""},
		{"streams with no_keepalive", func(p *Plan) { p.Protocol, p.MaxStreams, p.NoKeepAlive = H2, 4, true }, "max_streams = 4: concurrent streams do nothing with no_keepalive"},
		{"streams with keep-alive", func(p *Plan) { p.Protocol, p.MaxStreams = H2, 4 }, ""},
	} {
		p := Plan{URL: "https://127.0.0.1/"}
		tc.edit(&p)
		p.SetDefaults()
		err := p.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

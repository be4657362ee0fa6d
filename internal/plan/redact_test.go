package plan

import (
	"reflect"
	"strings"
	"testing"
)

func TestRedacted(t *testing.T) {
	p := Plan{
		URL:     "https://127.0.0.1:8443/",
		Headers: []Header{{"authorization", "Bearer s3cret"}, {"Accept", "*/*"}},
		TLS:     TLS{CAPEM: []byte("ca"), CertPEM: []byte("cert"), KeyPEM: []byte("key"), ServerName: "x"},
		Mix: []Request{
			{URL: "https://127.0.0.1:8443/a", Headers: []Header{{"Cookie", "id=1"}}},
			{URL: "https://127.0.0.1:8443/b", Headers: []Header{{"Proxy-Authorization", "Basic x"}, {"X-Y", "z"}}},
			{URL: "https://bob:hunter2@127.0.0.1:8443/c"},
		},
	}
	orig := Plan{
		URL:     p.URL,
		Headers: slicesCloneHeaders(p.Headers),
		TLS:     p.TLS,
		Mix:     []Request{{URL: p.Mix[0].URL, Headers: slicesCloneHeaders(p.Mix[0].Headers)}, {URL: p.Mix[1].URL, Headers: slicesCloneHeaders(p.Mix[1].Headers)}, {URL: p.Mix[2].URL}},
	}
	r := Redacted(p)
	if r.TLS.CertPEM != nil || r.TLS.KeyPEM != nil {
		t.Errorf("client certificate or key kept: %q %q", r.TLS.CertPEM, r.TLS.KeyPEM)
	}
	if string(r.TLS.CAPEM) != "ca" || r.TLS.ServerName != "x" {
		t.Errorf("non-secret TLS fields changed: %+v", r.TLS)
	}
	want := []Header{{"authorization", RedactedValue}, {"Accept", "*/*"}}
	if !reflect.DeepEqual(r.Headers, want) {
		t.Errorf("headers %v, want %v", r.Headers, want)
	}
	if r.Mix[0].Headers[0].Value != RedactedValue || r.Mix[1].Headers[0].Value != RedactedValue || r.Mix[1].Headers[1].Value != "z" {
		t.Errorf("mix headers %v, %v", r.Mix[0].Headers, r.Mix[1].Headers)
	}
	if got := r.Mix[2].URL; strings.Contains(got, "hunter2") || !strings.Contains(got, "bob:") {
		t.Errorf("mix URL %q: want the user kept and the password redacted", got)
	}
	if got := Redacted(Plan{URL: "https://bob:hunter2@127.0.0.1/"}).URL; strings.Contains(got, "hunter2") {
		t.Errorf("plan URL %q keeps its password", got)
	}
	if !reflect.DeepEqual(p, orig) {
		t.Errorf("Redacted modified its argument:\n got %+v\nwant %+v", p, orig)
	}
}

// TestRedactedQuery: a credential query parameter's value is replaced,
// whatever its case, in the plan's URL and the mix's; other parameters,
// their order and the rest of the URL stay as written.
func TestRedactedQuery(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://127.0.0.1/a?token=t0k&x=1", "https://127.0.0.1/a?token=" + RedactedValue + "&x=1"},
		{"https://127.0.0.1/?x=1&Access_Token=abc&y=%20", "https://127.0.0.1/?x=1&Access_Token=" + RedactedValue + "&y=%20"},
		{"https://127.0.0.1/o?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff00&X-Amz-Date=2026", "https://127.0.0.1/o?X-Amz-Credential=" + RedactedValue + "&X-Amz-Signature=" + RedactedValue + "&X-Amz-Date=2026"},
		{"https://127.0.0.1/?tokens=1&key", "https://127.0.0.1/?tokens=1&key"},
		{"https://127.0.0.1/p", "https://127.0.0.1/p"},
		// Text url.Parse refuses: no scheme, a bad escape.
		{"127.0.0.1:8443/a?token=t0k&x=1", "127.0.0.1:8443/a?token=" + RedactedValue + "&x=1"},
		{"https://bob:pw@127.0.0.1/%zz?sig=s1g#f", "https://bob:xxxxx@127.0.0.1/%zz?sig=" + RedactedValue + "#f"},
		{"bob:pw@127.0.0.1:8443/", "bob:xxxxx@127.0.0.1:8443/"},
		{"127.0.0.1:8443/a@b:c", "127.0.0.1:8443/a@b:c"},
	}
	for _, c := range cases {
		if got := Redacted(Plan{URL: c.in}).URL; got != c.want {
			t.Errorf("Redacted URL %q = %q, want %q", c.in, got, c.want)
		}
	}
	r := Redacted(Plan{URL: "https://127.0.0.1/", Mix: []Request{{URL: "https://bob:pw@127.0.0.1/m?sig=s1g"}}})
	if got := r.Mix[0].URL; strings.Contains(got, "s1g") || strings.Contains(got, ":pw@") {
		t.Errorf("mix URL %q keeps a secret", got)
	}
}

// TestValidateQuotesNoSecret: a URL with a password and an Authorization
// header with a line break are refused without quoting either secret.
func TestValidateQuotesNoSecret(t *testing.T) {
	p := Plan{URL: "https://user:pa55w0rd@127.0.0.1:8443/", Headers: []Header{{"Authorization", "Bearer t0ken\r\nX: y"}}}
	p.SetDefaults()
	err := p.Validate()
	if err == nil {
		t.Fatal("Validate accepted a URL with user info and a header with a line break")
	}
	for _, s := range []string{"pa55w0rd", "t0ken"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error quotes the secret %q: %v", s, err)
		}
	}
	if !strings.Contains(err.Error(), "headers[0]") || !strings.Contains(err.Error(), "user info") {
		t.Errorf("error does not name the bad fields: %v", err)
	}
}

func slicesCloneHeaders(h []Header) []Header { return append([]Header(nil), h...) }

// TestRedactedConventionalHeaders: headers that carry credentials by
// convention (API keys, tokens, sessions) are redacted as Authorization
// is, whatever their case; ordinary fields keep their values.
func TestRedactedConventionalHeaders(t *testing.T) {
	secret := []string{"X-Api-Key", "api-key", "Ocp-Apim-Subscription-Key", "X-Auth-Token", "Private-Token", "X-Vault-Token",
		"X-Amz-Security-Token", "X-Session-Id", "X-Client-Secret", "X-Signature", "X-Csrf-Token", "Set-Cookie"}
	plain := []string{"Accept", "Accept-Encoding", "Content-Type", "User-Agent", "X-Request-Id", "Cache-Control", "Keep-Alive", "X-Forwarded-For", "Host"}
	var hs []Header
	for _, n := range append(append([]string(nil), secret...), plain...) {
		hs = append(hs, Header{n, "v4lue-" + n})
	}
	r := Redacted(Plan{URL: "https://127.0.0.1/", Headers: hs, Mix: []Request{{URL: "https://127.0.0.1/m", Headers: hs}}})
	for _, got := range [][]Header{r.Headers, r.Mix[0].Headers} {
		for i, h := range got {
			if wantSecret := i < len(secret); (h.Value == RedactedValue) != wantSecret {
				t.Errorf("%s: value %q; want it redacted: %v", h.Name, h.Value, wantSecret)
			}
		}
	}
}

// TestBadHeaderHidesValue: a header without its colon is quoted in errors
// by its leading name alone, so a credential written after it stays out.
func TestBadHeaderHidesValue(t *testing.T) {
	cases := map[string]string{
		"Authorization Bearer t0ken": `"Authorization"…`,
		"X-Api-Key=s3cret":           `"X-Api-Key"…`,
		"nocolon":                    `"nocolon"`,
		" lead":                      `""…`,
	}
	for in, want := range cases {
		if got := BadHeader(in); got != want {
			t.Errorf("BadHeader(%q) = %s, want %s", in, got, want)
		}
	}
	_, err := ParseFile([]byte("url: https://127.0.0.1/\nmix:\n  - url: /a\n    headers: [\"Authorization Bearer t0ken\"]\n"), nil)
	if err == nil || strings.Contains(err.Error(), "t0ken") || !strings.Contains(err.Error(), "Authorization") {
		t.Errorf("mix header without a colon: error %v; want it named without its value", err)
	}
	err = (&Plan{URL: "https://127.0.0.1/", Mix: []Request{{URL: "https://127.0.0.1/a", Weight: 1, Headers: []Header{{"X-Api-Key", "k3y\r\nX: y"}}}}}).Validate()
	if err == nil || strings.Contains(err.Error(), "k3y") {
		t.Errorf("mix header with a line break: error %v; want it refused without its value", err)
	}
}

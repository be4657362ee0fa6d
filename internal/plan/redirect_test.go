package plan

import (
	"strings"
	"testing"
)

// TestMaxRedirects: max_redirects is read from a plan file, and Validate
// refuses a negative count and one above MaxRedirectHops,
// naming the field.
func TestMaxRedirects(t *testing.T) {
	p, err := ParseFile([]byte("url: https://127.0.0.1/\nmax_redirects: 3\n"), nil)
	if err != nil || p.MaxRedirects != 3 {
		t.Fatalf("ParseFile: max_redirects %d, %v; want 3", p.MaxRedirects, err)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate(max_redirects 3) = %v", err)
	}
	for _, c := range []struct {
		n     int
		proto Protocol
		want  string
	}{{-1, H1, "0 (a 3xx is the response) to 50"}, {MaxRedirectHops + 1, H2, "to 50 hops"}} {
		q := p
		q.MaxRedirects, q.Protocol = c.n, c.proto
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "max_redirects") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(max_redirects %d, %v) = %v, want an error naming max_redirects and %q", c.n, c.proto, err, c.want)
		}
	}
}

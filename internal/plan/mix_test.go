package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func readFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if v, ok := files[name]; ok {
			return []byte(v), nil
		}
		return nil, errors.New("open " + name + ": no such file")
	}
}

func TestParseMix(t *testing.T) {
	in := `# index pages, as httpress users spread load
GET https://app.test:8443/index1.html
GET https://app.test:8443/index2.html weight=3

POST https://app.test:8443/api header="Content-Type: application/json" header="X-A: b c" body=req.json weight=2
`
	got, err := ParseMix(strings.NewReader(in), "", readFiles(map[string]string{"req.json": `{"a":1}`}))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Method: "GET", URL: "https://app.test:8443/index1.html", Weight: 1},
		{Method: "GET", URL: "https://app.test:8443/index2.html", Weight: 3},
		{Method: "POST", URL: "https://app.test:8443/api", Weight: 2, Body: []byte(`{"a":1}`),
			Headers: []Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-A", Value: "b c"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseMix =\n%+v\nwant\n%+v", got, want)
	}
}

// TestParseMixRelative: a line's URL without a scheme resolves against the
// run's URL (RFC 3986 section 5), keeping its own path and query; a line
// in full is kept as written.
func TestParseMixRelative(t *testing.T) {
	in := "GET /a weight=3\nGET /b?x=1\nGET c.html\nGET https://app.test:8443/d\n"
	got, err := ParseMix(strings.NewReader(in), "https://app.test:8443/base/index.html?q=1", readFiles(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://app.test:8443/a", "https://app.test:8443/b?x=1", "https://app.test:8443/base/c.html", "https://app.test:8443/d"}
	for i, r := range got {
		if i >= len(want) || r.URL != want[i] {
			t.Errorf("ParseMix(%q)[%d].URL = %q, want %q", in, i, r.URL, want[i])
		}
	}
	if len(got) != len(want) || got[0].Weight != 3 {
		t.Errorf("ParseMix(%q) = %+v, want %d requests, the first of weight 3", in, got, len(want))
	}
}

func TestParseMixErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"GET", "mix line 1: want METHOD URL"},
		{"GET ftp://x/", `mix line 1: url "ftp://x/": scheme "ftp" not supported`},
		{"\nG T https://x/", "mix line 2"},
		{"GET https://x/ weight=0", `weight "0": want an integer from 1 to 1000000`},
		{"GET https://x/ body=missing", "mix line 1: body: open missing: no such file"},
		{"GET https://x/ header=nocolon", `header "nocolon"`},
		{"GET https://x/ color=red", `unknown option "color"`},
		{`GET https://x/ header="A: b`, "unterminated quote"},
		{"# only a comment", "mix holds no request"},
		{"GET /a weight=3", `mix line 1: url "/a" is relative and there is no run URL to resolve it against: give the URL on the command line`},
		{"/a 3", `mix line 1: "/a" is a URL where the method goes: want METHOD URL`},
	} {
		_, err := ParseMix(strings.NewReader(tc.in), "", readFiles(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMix(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseMix(f *testing.F) {
	f.Add("GET https://app.test/ weight=2\nPOST https://app.test/x header=\"A: b\" body=f")
	f.Add("# c\n\nHEAD http://[::1]:80/")
	f.Fuzz(func(t *testing.T, in string) {
		reqs, err := ParseMix(strings.NewReader(in), "https://app.test:8443/base/", readFiles(map[string]string{"f": "x"}))
		if err != nil {
			return
		}
		for _, r := range reqs {
			if r.Weight < 1 || !validToken(r.Method) {
				t.Fatalf("accepted %+v", r)
			}
			if _, err := ParseTarget(r.URL); err != nil {
				t.Fatalf("accepted bad url %q", r.URL)
			}
		}
	})
}

// TestMixWorkBounded: a mix whose round-robin order would take the agent
// minutes to build (65536 requests of different weights summing to about
// 2^20: 2^36 steps) is refused at validation, naming the rule; equal
// weights, or weights with a common divisor, cost what their order needs.
func TestMixWorkBounded(t *testing.T) {
	mix := func(n int, weight func(i int) int) Plan {
		p := Plan{URL: "https://127.0.0.1/"}
		for i := range n {
			p.Mix = append(p.Mix, Request{Method: "GET", URL: "https://127.0.0.1/x", Weight: weight(i)})
		}
		p.SetDefaults()
		return p
	}
	for _, tc := range []struct {
		name string
		p    Plan
		want string
	}{
		{"too much work", mix(1<<16, func(i int) int { return 15 + i%2 }),
			"plan: mix = 65536 requests with weights summing to 1015808 (over their common divisor): requests × weight sum must be at most 67108864"},
		{"too many requests", mix(1<<16+1, func(int) int { return 1 }), "plan: mix = 65537 requests: want at most 65536"},
		{"long period", mix(3, func(int) int { return 1_000_000 - 7 }), ""}, // equal: period 3
		{"period over the bound", mix(2, func(i int) int { return 1_000_000 - i }), "plan: mix = weights summing to 1999999 (over their common divisor): want at most 1048576"},
		{"equal weights", mix(1<<16, func(int) int { return 16 }), ""},
		{"common divisor", mix(1<<12, func(i int) int { return 16 * (1 + i%2) }), ""}, // 4096 × 6144 steps
		{"at the bound", mix(1<<10, func(i int) int { return 1 + i%127 }), ""},
	} {
		err := tc.p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRoundRobinWeights(t *testing.T) {
	got := RoundRobinWeights([]Request{{Weight: 4}, {Weight: 0}, {Weight: 6}})
	if want := []int{4, 1, 6}; !reflect.DeepEqual(got, want) {
		t.Errorf("RoundRobinWeights(4, 0, 6) = %v, want %v", got, want)
	}
	got = RoundRobinWeights([]Request{{Weight: 4}, {Weight: 8}, {Weight: 6}})
	if want := []int{2, 4, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("RoundRobinWeights(4, 8, 6) = %v, want %v", got, want)
	}
}

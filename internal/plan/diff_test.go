package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDiff: two plans' differing settings are listed with their values,
// an element only one side has names its index, bytes show as lengths,
// and no secret appears, even where the two sides' secrets differ.
func TestDiff(t *testing.T) {
	a := Plan{URL: "https://a.example/", Connections: 10, Duration: time.Second,
		Headers: []Header{{Name: "Authorization", Value: "Bearer s3cret"}, {Name: "X-Case", Value: "1"}}, Body: []byte("abc")}
	a.SetDefaults()
	if d := Diff(a, a); d != nil {
		t.Fatalf("a plan against itself: %v", d)
	}
	b := a
	b.URL = "https://b.example/"
	b.Connections = 20
	b.Headers = []Header{{Name: "Authorization", Value: "Bearer 0ther"}}
	b.Body = []byte("abcd")
	b.TLS.KeyPEM = []byte("PRIVATE KEY")
	want := []Difference{
		{"URL", `"https://a.example/"`, `"https://b.example/"`},
		{"Headers[1]", "{X-Case 1}", "(none)"},
		{"Body", "3 bytes", "4 bytes"},
		{"Connections", "10", "20"},
	}
	got := Diff(a, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff =\n%q\nwant\n%q", got, want)
	}
	for _, d := range got {
		if s := d.A + d.B; strings.Contains(s, "s3cret") || strings.Contains(s, "0ther") || strings.Contains(s, "PRIVATE") {
			t.Errorf("a secret in %+v", d)
		}
	}
}

package coordinator

import (
	"regexp"
	"testing"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestPlanHash: the same plan hashes the same, another plan differently,
// in the documented form; so do plans that differ only in their body or
// CA (which the stored plan leaves out), and plans that differ only in a
// credential hash the same (redacted first: the hash reveals nothing of
// it).
func TestPlanHash(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 4, Body: []byte("aaaa"),
		Headers: []plan.Header{{Name: "Authorization", Value: "Bearer one"}}}
	hash := func(edit func(*plan.Plan)) string {
		t.Helper()
		q := p
		edit(&q)
		h, err := planHash(q)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a := hash(func(*plan.Plan) {})
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(a) || a != hash(func(*plan.Plan) {}) {
		t.Fatalf("hash %q: not the form, or not stable", a)
	}
	for name, edit := range map[string]func(*plan.Plan){
		"connections": func(q *plan.Plan) { q.Connections = 5 },
		"body":        func(q *plan.Plan) { q.Body = []byte("bbbb") },
		"CA":          func(q *plan.Plan) { q.TLS.CAPEM = []byte("-----BEGIN CERTIFICATE-----") },
	} {
		if hash(edit) == a {
			t.Errorf("a plan with another %s hashes the same", name)
		}
	}
	if hash(func(q *plan.Plan) { q.Headers = []plan.Header{{Name: "Authorization", Value: "Bearer two"}} }) != a {
		t.Error("plans differing only in a credential hash differently: the hash depends on the secret")
	}
}

package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestDemoRunIDStored: coordctl demo with a run store prints the run ID
// that coordctl report finds there; with an empty --data-dir (no store) it says
// the run ID printed is not stored, and claims no stored run.
func TestDemoRunIDStored(t *testing.T) {
	demo := func(dataDir string) string { // its stdout (the report) then its stderr (the demo's notes)
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run([]string{"demo", "--agents", "1", "-c", "2", "-d", "1s", "--data-dir", dataDir}, &out, &errOut); code != 0 {
			t.Fatalf("demo --data-dir %q: exit %d\n%s%s", dataDir, code, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	out := demo("")
	if !regexp.MustCompile(`(?m)^Run ID: \S+ \(not stored\)$`).MatchString(out) || strings.Contains(out, "stored as run") {
		t.Errorf("demo --data-dir '': want 'Run ID: ID (not stored)' and no stored run:\n%s", out)
	}
	dir := t.TempDir()
	out = demo(dir)
	m := regexp.MustCompile(`(?m)^Run ID: (\S+)$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "stored as run "+m[1]) {
		t.Fatalf("demo --data-dir DIR: want a plain run ID, stored:\n%s", out)
	}
	var rep, errOut bytes.Buffer
	if code := run([]string{"report", "--data-dir", dir, m[1]}, &rep, &errOut); code != 0 {
		t.Errorf("report of the demo's run %s: exit %d %s", m[1], code, errOut.String())
	}
}

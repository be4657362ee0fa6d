package main

import (
	"strings"
	"testing"
)

// TestHeaderBeforeProgress: the text report's "Running ... @ URL" header
// is printed once, with the run's first interval, before the progress
// lines, as wrk prints it; the rest of the report follows them.
func TestHeaderBeforeProgress(t *testing.T) {
	env := newTestEnv(t, 1)
	var out lockedBuffer // stdout and stderr: their lines in the order written
	if code := run([]string{"--coordinator", env.coord, "run", "-c2", "-d2", "--cacert", env.caFile, env.url}, &out, &out); code != 0 {
		t.Fatalf("coordctl run: exit %d:\n%s", code, out.String())
	}
	got := out.String()
	header := "Running 2s test @ " + env.url + "\n  1 agent and 2 connections\n"
	h, p, r := strings.Index(got, header), strings.Index(got, "  [  1] "), strings.Index(got, "  Thread Stats")
	if strings.Count(got, "Running ") != 1 || h != 0 || p < h || r < p {
		t.Errorf("header at %d, first progress line at %d, Thread Stats at %d; want 0 < progress < Thread Stats, one header:\n%s", h, p, r, got)
	}
}

// TestFormatH2load: --format h2load prints h2load's summary (and no wrk
// header); an unknown format is a usage error naming the flag.
func TestFormatH2load(t *testing.T) {
	env := newTestEnv(t, 1)
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "-c2", "-n", "200", "--format", "h2load", "--cacert", env.caFile, env.url)
	if code != 0 {
		t.Fatalf("coordctl run --format h2load: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"finished in ", "\nrequests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout\n",
		"\nstatus codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx\n", "\ntraffic: ", "\ntime for request: ", "\nRun ID: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "Running ") {
		t.Errorf("wrk's header in the h2load summary:\n%s", stdout)
	}
	code, _, stderr = runCLI("--coordinator", env.coord, "run", "--format", "xml", env.url)
	if want := `--format "xml": want text (wrk's layout) or h2load`; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--format xml: exit %d, %q; want 2 and %q", code, stderr, want)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectionRatePlanFile: a plan file's cps runs a connection rate,
// the flags overriding its keys (--requests-per-connection without --cps,
// since the file has cps); the report says what ran.
func TestConnectionRatePlanFile(t *testing.T) {
	env := newTestEnv(t, 1)
	file := filepath.Join(t.TempDir(), "cps.yaml")
	if err := os.WriteFile(file, []byte("url: "+env.url+"\ncps: 40\nrequests_per_connection: 3\nduration: 1s\nclose: rst\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", file, "--requests-per-connection", "2", "--cacert", env.caFile, "--json", jsonFile)
	if code != 0 {
		t.Fatalf("run %s: exit %d: %s", file, code, stderr)
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Close          string `json:"close"`
		ConnectionRate *struct {
			TargetCPS             float64 `json:"target_cps"`
			Connections           int64   `json:"connections"`
			RequestsPerConnection int     `json:"requests_per_connection"`
		} `json:"connection_rate"`
		Issued int64 `json:"issued"`
		Agents []struct {
			Connections int64 `json:"connections"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	cr := rep.ConnectionRate
	if cr == nil || cr.TargetCPS != 40 || cr.RequestsPerConnection != 2 || rep.Close != "rst" {
		t.Fatalf("report: connection rate %+v, close %q; want target 40/s, 2 requests per connection, rst\n%s", cr, rep.Close, stdout)
	}
	// Each connection sends 2 requests (those open at the window's end
	// fewer).
	if cr.Connections < 10 || rep.Issued > 2*cr.Connections || rep.Issued < cr.Connections {
		t.Errorf("%d connections issued %d requests: want 2 each", cr.Connections, rep.Issued)
	}
	// The agent's row gives its part of --max-open (the larger of -c, 10,
	// and the rate, 40), not of -c, which opens nothing at a connection rate.
	if len(rep.Agents) != 1 || rep.Agents[0].Connections != 40 {
		t.Errorf("agent rows %+v: want one of 40 connections, its part of --max-open", rep.Agents)
	}
	if !strings.Contains(stdout, "Conn rate:") {
		t.Errorf("text report lacks the connection rate:\n%s", stdout)
	}
}

// TestConnectionRatePlanFileErrors: the flags that need a connection rate
// name themselves when neither --cps nor the file gives one, and -R
// cannot turn a file's connection rate into a request rate.
func TestConnectionRatePlanFileErrors(t *testing.T) {
	dir := t.TempDir()
	cps := filepath.Join(dir, "cps.yaml")
	rate := filepath.Join(dir, "rate.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	cpsStages, rateStages := filepath.Join(dir, "cps-stages.yaml"), filepath.Join(dir, "rate-stages.yaml")
	for name, text := range map[string]string{
		cps:        "url: https://127.0.0.1/\ncps: 100\n",
		rate:       "url: https://127.0.0.1/\nrate: 100\n",
		bad:        "url: https://127.0.0.1/\ncps: 100\nrequests_per_connection: -2\n",
		cpsStages:  "url: https://127.0.0.1/\ncps: 100\nstages:\n  - {duration: 2s, cps: 200}\n",
		rateStages: "url: https://127.0.0.1/\nrate: 100\nstages:\n  - {duration: 2s, rate: 200}\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", rate, "--max-open", "50"}, "--max-open: only with --cps (or cps in the plan file)"},
		{[]string{"run", cps, "-R", "50"}, "-R/--rate: the plan file sets cps (new connections/s): give --cps to change the rate"},
		{[]string{"run", cps, "--max-open", "5", "--max-connections", "5"}, "--max-open and --max-connections: choose one"},
		{[]string{"run", cps, "--requests-per-connection", "-1"}, "--requests-per-connection -1: want 0 (the handshake only) or more"},
		// A rate flag over stages that ramp the rate would move only the
		// starting rate: refused, whichever the flag and the stages' rate.
		{[]string{"run", cpsStages, "--cps", "500"}, "--cps over the plan file's stages, which ramp cps to their own targets: the flag would change only the starting rate; edit the stages' cps or drop the flag"},
		{[]string{"run", rateStages, "-R", "500"}, "-R/--rate over the plan file's stages, which ramp rate to their own targets"},
		{[]string{"run", rateStages, "--cps", "500"}, "--cps over the plan file's stages"},
		{[]string{"run", bad}, bad + ": plan: requests_per_connection = -2: want 0 (the handshake only) or more"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordctl %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/store"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"24h":                  now.Add(-24 * time.Hour),
		"30m":                  now.Add(-30 * time.Minute),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01T10:00:00Z": time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	if _, err := parseSince("yesterday", now); err == nil {
		t.Error("parseSince(yesterday) succeeded")
	}
}

// storeWithRun makes a run store holding one not-finished run of two
// intervals (100 requests each at 500 us), tagged base.
func storeWithRun(t *testing.T) (dir, id string) {
	t.Helper()
	return storeWithRunOf(t, 2)
}

// storeWithRunOf is storeWithRun with n intervals (100 requests each).
func storeWithRunOf(t *testing.T, n int32) (dir, id string) {
	t.Helper()
	dir, id = t.TempDir(), "20261202T100000Z-abcdef"
	h := hist.New()
	for range 100 {
		h.RecordMicros(500)
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r := &pb.StoredRun{RunId: id, Plan: &pb.Plan{Url: "https://127.0.0.1:8443/", Connections: 4}, AcceptedAtUnixNano: time.Now().UnixNano(),
		Tags: []string{"base"}, State: pb.RunState_RUN_STATE_NOT_FINISHED, Error: "the coordinator stopped during the run"}
	for i := range n {
		r.Intervals = append(r.Intervals, &pb.Progress{Index: i, Point: &pb.TimelinePoint{Index: i, Start: durationpb.New(time.Duration(i) * time.Second),
			Length: durationpb.New(time.Second), Requests: 100, Latency: b}, Counters: &pb.Counters{Requests: 100, Status: map[int32]int64{200: 100}}})
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Import(r); err != nil {
		t.Fatal(err)
	}
	return dir, id
}

func TestStoreCommandsOnDataDir(t *testing.T) {
	dir, id := storeWithRun(t)
	coordctl := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return out.String(), errOut.String(), code
	}
	out, errOut, code := coordctl("runs", "--data-dir", dir, "--json", "--tag", "base")
	var rows []runRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].RunID != id || rows[0].State != "not finished" ||
		rows[0].Requests != 200 || rows[0].RPS != 100 || rows[0].P99Us != 500 || rows[0].Intervals != 2 {
		t.Errorf("runs --json: exit %d, %s%s: want the run, not finished, 200 requests at 100 req/s, p99 500us", code, out, errOut)
	}
	// The table's p99 is in the reports' units (FormatMicros: "us", never
	// Go's "µs").
	if out, errOut, code := coordctl("runs", "--data-dir", dir, "--tag", "base"); code != 0 || !strings.Contains(out, "500.00us") || strings.Contains(out, "µs") {
		t.Errorf("runs: exit %d, want p99 500.00us in the reports' units\n%s%s", code, out, errOut)
	}
	if out, _, _ := coordctl("runs", "--data-dir", dir, "--tag", "other"); !strings.Contains(out, "no stored runs") {
		t.Errorf("runs --tag other = %q", out)
	}
	out, errOut, code = coordctl("report", "--data-dir", dir, id)
	if code != 0 || !strings.Contains(out, "200 requests in 2.00s") || !strings.Contains(out, "Partial: not finished: the coordinator stopped during the run") {
		t.Errorf("report: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = coordctl("report", "--data-dir", dir, "--format", "csv", id); code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("report --format csv: exit %d, want a header and 2 rows\n%s%s", code, out, errOut)
	}
	// The stored run kept no agent's intervals: csv-per-agent gives the
	// merged rows and says why there are no others.
	if out, errOut, code = coordctl("report", "--data-dir", dir, "--format", "csv-per-agent", id); code != 0 || strings.Count(out, "\n") != 3 ||
		!strings.Contains(errOut, "run "+id+" kept no per-agent intervals (a run keeps them when started with --csv-per-agent or --hlog)") {
		t.Errorf("report --format csv-per-agent of a run without agent intervals: exit %d, want a header, 2 rows and a note on stderr\n%s%s", code, out, errOut)
	}
	if _, errOut, code = coordctl("report", "--data-dir", dir, "--format", "csv", id); errOut != "" {
		t.Errorf("report --format csv: exit %d, stderr %q, want none", code, errOut)
	}
	if out, errOut, code = coordctl("report", "--data-dir", dir, "--format", "h2load", id); code != 0 || !strings.Contains(out, "requests: 200 total") {
		t.Errorf("report --format h2load: exit %d, want h2load's requests line\n%s%s", code, out, errOut)
	}
	if _, errOut, code = coordctl("report", "--data-dir", dir, "--format", "pdf", id); code != 2 || !strings.Contains(errOut, "csv, csv-per-agent, h2load, hlog, html, json, text") {
		t.Errorf("report --format pdf: exit %d, %q: want 2 listing the formats", code, errOut)
	}
	if _, errOut, code = coordctl("report", "--data-dir", dir, "nope"); code != 1 || !strings.Contains(errOut, "no such run") {
		t.Errorf("report of an unknown run: exit %d, %q", code, errOut)
	}
	if _, errOut, code = coordctl("runs", "--data-dir", dir, "--local"); code != 2 {
		t.Errorf("runs --data-dir --local: exit %d, %q, want 2", code, errOut)
	}
	if out, errOut, code = coordctl("rm", "--data-dir", dir, id); code != 0 || !strings.Contains(out, "removed run "+id) {
		t.Errorf("rm: exit %d %s%s", code, out, errOut)
	}
	if _, errOut, code = coordctl("rm", "--data-dir", dir, id); code != 1 || !strings.Contains(errOut, "no such run") {
		t.Errorf("rm twice: exit %d %q", code, errOut)
	}
	// A store another process (here: this one) holds is refused, pointing
	// at the coordinator.
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, errOut, code = coordctl("runs", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "in use by another process") || !strings.Contains(errOut, "--coordinator") {
		t.Errorf("runs on a store in use: exit %d %q", code, errOut)
	}
}

func TestRunThresholdFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--threshold p99<3":                    `--threshold: threshold "p99<3"`,
		"--abort-on-fail":                      "--abort-on-fail: no --threshold",
		"--threshold p99<3ms --abort-delay 2s": "apply only with --abort-on-fail",
		"--tag a,b":                            `--tag "a,b"`,
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"run", "--coordinator", "127.0.0.1:1"}, append(strings.Fields(args), "https://127.0.0.1:1/")...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), want) {
			t.Errorf("run %s: exit %d, %q, want 2 and %q", args, code, errOut.String(), want)
		}
	}
}

// TestRunRowPartial: a finished run that lost an agent is listed as
// partial, in the table and in --json, not as finished.
func TestRunRowPartial(t *testing.T) {
	// as the store lists them: a summary without the result
	whole, err := store.Summarize(&pb.StoredRun{RunId: "w", State: pb.RunState_RUN_STATE_FINISHED, Result: &pb.RunResult{}})
	if err != nil {
		t.Fatal(err)
	}
	part, err := store.Summarize(&pb.StoredRun{RunId: "p", State: pb.RunState_RUN_STATE_FINISHED, Result: &pb.RunResult{Partial: true}})
	if err != nil {
		t.Fatal(err)
	}
	whole.Run.Result, part.Run.Result = nil, nil
	if r := newRunRow(whole); r.State != "finished" || r.Partial {
		t.Errorf("whole run: state %q, partial %v; want finished, false", r.State, r.Partial)
	}
	r := newRunRow(part)
	if r.State != "partial" || !r.Partial {
		t.Errorf("run that lost an agent: state %q, partial %v; want partial, true", r.State, r.Partial)
	}
	var out bytes.Buffer
	if err := writeRuns(&out, []runRow{r}); err != nil || !strings.Contains(out.String(), " partial ") {
		t.Errorf("runs table = %q, %v; want the state partial", out.String(), err)
	}
}

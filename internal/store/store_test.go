package store

import (
	"bytes"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// interval returns merged interval i with n requests of latency us each.
func interval(t *testing.T, i int32, n int64, us int64) *pb.Progress {
	t.Helper()
	h := hist.New()
	for range n {
		h.RecordMicros(us)
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Progress{Index: i, Requests: n, Point: &pb.TimelinePoint{Index: i, Start: durationpb.New(time.Duration(i) * time.Second),
		Length: durationpb.New(time.Second), Requests: n, Latency: b}, Counters: &pb.Counters{Requests: n, Status: map[int32]int64{200: n}}}
}

func run(id string, accepted time.Time, tags ...string) *pb.StoredRun {
	return &pb.StoredRun{RunId: id, Plan: &pb.Plan{Url: "https://127.0.0.1:8443/" + id}, AcceptedAtUnixNano: accepted.UnixNano(),
		Tags: tags, State: pb.RunState_RUN_STATE_RUNNING}
}

func TestRunningBecomesNotFinished(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(run("r1", time.Now(), "a")); err != nil {
		t.Fatal(err)
	}
	for i := range int32(3) {
		if err := st.AddInterval("r1", interval(t, i, 10, 100*int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddInterval("nope", interval(t, 0, 1, 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddInterval of an unknown run: %v, want ErrNotFound", err)
	}
	// A second open while the first holds the store fails, naming why.
	if _, err := Open(dir); !errors.Is(err, ErrInUse) {
		t.Errorf("second Open: %v, want ErrInUse", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get("r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.GetState() != pb.RunState_RUN_STATE_NOT_FINISHED || len(r.GetIntervals()) != 3 || !strings.Contains(r.GetError(), "3 intervals") {
		t.Errorf("reopened: state %v, %d intervals, error %q; want NOT_FINISHED with 3 intervals", r.GetState(), len(r.GetIntervals()), r.GetError())
	}
	sums, err := st.List(Filter{})
	if err != nil || len(sums) != 1 {
		t.Fatalf("List = %v, %v", sums, err)
	}
	// 30 requests over 3 s, p99 from the merged intervals (10 at 300 us).
	if s := sums[0]; s.GetRequests() != 30 || s.GetWindowS() != 3 || s.GetRps() != 10 || s.GetP99Us() != 300 || s.GetIntervals() != 3 {
		t.Errorf("summary = %v, want 30 requests over 3 s, 10 req/s, p99 300 us, 3 intervals", s)
	}
}

func TestListFilterDeleteImport(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, r := range []*pb.StoredRun{run("a", t0, "base"), run("b", t0.Add(time.Hour), "base", "qat"), run("c", t0.Add(2*time.Hour), "qat")} {
		r.SearchId = map[bool]string{true: "s1"}[i > 0]
		if err := st.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(f Filter) string {
		sums, err := st.List(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range sums {
			out = append(out, s.GetRun().GetRunId())
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "c,b,a"},
		{Filter{Tags: []string{"base"}}, "b,a"},
		{Filter{Tags: []string{"base", "qat"}}, "b"},
		{Filter{Since: t0.Add(30 * time.Minute)}, "c,b"},
		{Filter{Target: "/a"}, "a"},
		{Filter{SearchID: "s1"}, "c,b"},
		{Filter{Limit: 1}, "c"},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
	if err := st.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete twice: %v, want ErrNotFound", err)
	}
	if _, err := st.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if got := ids(Filter{}); got != "c,a" {
		t.Errorf("after Delete: %s", got)
	}

	// Export, import elsewhere: the same run, intervals included.
	src := run("x", t0)
	src.Intervals = []*pb.Progress{interval(t, 0, 5, 10), interval(t, 1, 7, 20)}
	var buf bytes.Buffer
	if err := WriteFile(&buf, src); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, src) {
		t.Errorf("ReadFile(WriteFile(r)) differs from r")
	}
	if err := st.Import(got); err != nil {
		t.Fatal(err)
	}
	if err := st.Import(got); !errors.Is(err, ErrExists) {
		t.Errorf("Import twice: %v, want ErrExists", err)
	}
	back, err := st.Get("x")
	if err != nil {
		t.Fatal(err)
	}
	if back.GetState() != pb.RunState_RUN_STATE_NOT_FINISHED || len(back.GetIntervals()) != 2 || !proto.Equal(back.GetIntervals()[1], src.Intervals[1]) {
		t.Errorf("imported run: state %v, intervals %v", back.GetState(), back.GetIntervals())
	}
}

func TestReadFileRefuses(t *testing.T) {
	var good bytes.Buffer
	r := run("x", time.Now())
	r.Intervals = []*pb.Progress{interval(t, 0, 1, 1)}
	if err := WriteFile(&good, r); err != nil {
		t.Fatal(err)
	}
	corrupt := proto.Clone(r).(*pb.StoredRun)
	corrupt.Intervals[0].Point.Latency = []byte("not a histogram")
	var bad bytes.Buffer
	if err := WriteFile(&bad, corrupt); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"binary":    {[]byte("\x00\x01"), "not a .phx file"},
		"other":     {[]byte(`{"format":"other","version":1}`), `format "other"`},
		"newer":     {regexp.MustCompile(`"version":\s*1`).ReplaceAll(good.Bytes(), []byte(`"version": 9`)), "version 9 is newer"},
		"no id":     {[]byte(`{"format":"phalanx-run","version":1,"run":{"state":"RUN_STATE_FINISHED"}}`), "no run_id"},
		"corrupt":   {bad.Bytes(), "run x interval 0"},
		"bad state": {[]byte(`{"format":"phalanx-run","version":1,"run":{"runId":"x"}}`), "unknown state"},
	} {
		if _, err := ReadFile(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ReadFile error %v, want %q", name, err, c.want)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("99")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Errorf("Open of a newer store: %v", err)
	}
}

func TestUserDir(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/x/data")
	if d, err := UserDir(); err != nil || d != "/x/data/phalanx" {
		t.Errorf("UserDir with XDG_DATA_HOME = %q, %v", d, err)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, err := UserDir(); err != nil || d != "/home/u/.local/share/phalanx" {
		t.Errorf("UserDir with HOME = %q, %v", d, err)
	}

}

// TestListPartial: a finished run that lost an agent is listed with
// partial set, though the listing carries no result.
func TestListPartial(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	empty, err := hist.New().Encode()
	if err != nil {
		t.Fatal(err)
	}
	for id, partial := range map[string]bool{"20261202T100000Z-aaaaaa": false, "20261202T100001Z-bbbbbb": true} {
		r := &pb.StoredRun{RunId: id, Plan: &pb.Plan{Url: "https://127.0.0.1:8443/"}, AcceptedAtUnixNano: 1,
			State: pb.RunState_RUN_STATE_FINISHED, Result: &pb.RunResult{Partial: partial, Histograms: &pb.Histograms{Latency: empty, Connect: empty, TlsFull: empty, TlsResumed: empty, Ttfb: empty, ServiceTime: empty, Lateness: empty}}}
		if err := st.Import(r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.List(Filter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("List: %d runs, %v", len(runs), err)
	}
	for _, s := range runs {
		if want := s.GetRun().GetRunId() == "20261202T100001Z-bbbbbb"; s.GetPartial() != want || s.GetRun().GetResult() != nil {
			t.Errorf("run %s: partial %v, result %v; want partial %v and no result", s.GetRun().GetRunId(), s.GetPartial(), s.GetRun().GetResult(), want)
		}
	}
}

// TestGetForReport: a run with a result comes without its intervals
// (Get still has them), one without a result with them.
func TestGetForReport(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	empty, err := hist.New().Encode()
	if err != nil {
		t.Fatal(err)
	}
	done, cut := run("20261202T100000Z-aaaaaa", time.Unix(1, 0)), run("20261202T100001Z-bbbbbb", time.Unix(2, 0))
	done.State = pb.RunState_RUN_STATE_FINISHED
	done.Result = &pb.RunResult{Histograms: &pb.Histograms{Latency: empty, Connect: empty, TlsFull: empty, TlsResumed: empty, Ttfb: empty, ServiceTime: empty, Lateness: empty}}
	for _, r := range []*pb.StoredRun{done, cut} {
		r.Intervals = []*pb.Progress{interval(t, 0, 5, 10), interval(t, 1, 7, 20)}
		if err := st.Import(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id        string
		forReport bool
		want      int
	}{{done.RunId, true, 0}, {done.RunId, false, 2}, {cut.RunId, true, 2}, {cut.RunId, false, 2}} {
		get := st.Get
		if c.forReport {
			get = st.GetForReport
		}
		r, err := get(c.id)
		if err != nil || len(r.GetIntervals()) != c.want || (r.GetResult() != nil) != (c.id == done.RunId) {
			t.Errorf("run %s (for report %v): %d intervals, result %v, err %v; want %d intervals", c.id, c.forReport, len(r.GetIntervals()), r.GetResult() != nil, err, c.want)
		}
	}
	if _, err := st.GetForReport("20261202T100002Z-cccccc"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing run: %v, want ErrNotFound", err)
	}
}

package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/internal/hist"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// SchemaVersion is the store schema this package writes. Open reads a
// store of this version or older (migrating it), and refuses a newer one.
// Version 1: the buckets of the package doc.
const SchemaVersion = 1

// FileName is the database file in the data directory.
const FileName = "runs.db"

// DaemonDir is the coordinator daemon's default data directory.
const DaemonDir = "/var/lib/phalanx"

// lockTimeout bounds the wait for the database's file lock (bbolt's
// flock): another process holding it is an error, not a hang.
const lockTimeout = time.Second

var (
	bucketMeta      = []byte("meta")
	bucketRuns      = []byte("runs")
	bucketIntervals = []byte("intervals")
	keySchema       = []byte("schema")
)

// ErrNotFound is returned for a run ID the store does not hold.
var ErrNotFound = errors.New("no such run in the store")

// ErrExists is returned by Import for a run ID the store already holds.
var ErrExists = errors.New("a run with this ID is already in the store")

// ErrInUse is returned by Open when another process holds the store.
var ErrInUse = errors.New("in use by another process")

// UserDir returns the per-user data directory for runs of a coordinator
// embedded in coordctl (coordctl demo): $XDG_DATA_HOME/phalanx, else
// $HOME/.local/share/phalanx (the XDG Base Directory specification's data
// home). Errors: neither variable set.
func UserDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "phalanx"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("run store: no per-user data directory: %w", err)
	}
	return filepath.Join(home, ".local", "share", "phalanx"), nil
}

// Store is an open run store. Its methods are safe for concurrent use.
type Store struct {
	db  *bolt.DB
	dir string
}

// Open opens (creating it, mode 0700, when missing) the run store in dir.
// Runs left RUNNING by a process that died mid-run (no live process holds
// the store, or Open would fail) become NOT_FINISHED, keeping their
// intervals. Errors: ErrInUse when another process has the store open
// (after a 1 s wait), a store written by a newer schema, and the
// directory's or file's own errors, each naming the path.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("run store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("run store %s: %w", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("run store %s: %w", path, err)
	}
	s := &Store{db: db, dir: dir}
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("run store %s: %w", path, err)
	}
	return s, nil
}

// Dir returns the store's data directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// init creates the buckets, checks the schema version and marks runs left
// RUNNING as NOT_FINISHED.
func (s *Store) init() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keySchema); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("schema version %q is not a number", v)
			}
			if n > SchemaVersion {
				return fmt.Errorf("schema version %d is newer than this build's %d: use a newer coordctl or coordinator", n, SchemaVersion)
			}
			// Older schemas would be migrated here; version 1 is the first.
		}
		if err := meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion))); err != nil {
			return err
		}
		runs, err := tx.CreateBucketIfNotExists(bucketRuns)
		if err != nil {
			return err
		}
		ivs, err := tx.CreateBucketIfNotExists(bucketIntervals)
		if err != nil {
			return err
		}
		var stale []*pb.StoredRun
		if err := runs.ForEach(func(k, v []byte) error {
			r := &pb.StoredRun{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("run %s: %w", k, err)
			}
			if r.GetState() == pb.RunState_RUN_STATE_RUNNING {
				stale = append(stale, r)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, r := range stale {
			n := 0
			if b := ivs.Bucket([]byte(r.GetRunId())); b != nil {
				n = b.Stats().KeyN
			}
			r.State = pb.RunState_RUN_STATE_NOT_FINISHED
			r.Error = fmt.Sprintf("the coordinator stopped during the run (killed or crashed); the store holds the %d intervals it had merged", n)
			if err := putRun(runs, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func putRun(b *bolt.Bucket, r *pb.StoredRun) error {
	if r.GetRunId() == "" {
		return errors.New("run has no ID")
	}
	rec := proto.Clone(r).(*pb.StoredRun)
	rec.Intervals = nil // kept in their own bucket
	rec.Schema = SchemaVersion
	data, err := proto.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put([]byte(r.GetRunId()), data)
}

// Put writes run r's record (created or replaced), without its intervals:
// those are written with AddInterval. Errors: a run without an ID, and
// the database's.
func (s *Store) Put(r *pb.StoredRun) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putRun(tx.Bucket(bucketRuns), r) })
}

// AddInterval writes one merged interval of run runID (its index is
// pr's). Errors: an unknown run, and the database's.
func (s *Store) AddInterval(runID string, pr *pb.Progress) error {
	data, err := proto.Marshal(pr)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRuns).Get([]byte(runID)) == nil {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		b, err := tx.Bucket(bucketIntervals).CreateBucketIfNotExists([]byte(runID))
		if err != nil {
			return err
		}
		return b.Put(indexKey(pr.GetIndex()), data)
	})
}

func indexKey(i int32) []byte {
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], uint32(i))
	return k[:]
}

// Get returns run id with its intervals in index order. Errors:
// ErrNotFound, a record that does not decode.
func (s *Store) Get(id string) (*pb.StoredRun, error) {
	var r *pb.StoredRun
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = getRun(tx, id, true)
		return err
	})
	return r, err
}

// GetForReport returns run id as its report needs it
// (wire.RunFromStored): with its result, without its intervals, or
// without a result with its intervals in index order. A long run's
// intervals are as large as its result's timeline, so a report of it
// reads half as much. Errors: as Get's.
func (s *Store) GetForReport(id string) (*pb.StoredRun, error) {
	var r *pb.StoredRun
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		if r, err = getRun(tx, id, false); err != nil || r.GetResult() != nil {
			return err
		}
		r, err = getRun(tx, id, true)
		return err
	})
	return r, err
}

func getRun(tx *bolt.Tx, id string, intervals bool) (*pb.StoredRun, error) {
	v := tx.Bucket(bucketRuns).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	r := &pb.StoredRun{}
	if err := proto.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	if !intervals {
		return r, nil
	}
	b := tx.Bucket(bucketIntervals).Bucket([]byte(id))
	if b == nil {
		return r, nil
	}
	return r, b.ForEach(func(k, v []byte) error {
		pr := &pb.Progress{}
		if err := proto.Unmarshal(v, pr); err != nil {
			return fmt.Errorf("run %s interval %d: %w", id, binary.BigEndian.Uint32(k), err)
		}
		r.Intervals = append(r.Intervals, pr)
		return nil
	})
}

// Delete removes run id and its intervals. Errors: ErrNotFound.
func (s *Store) Delete(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if runs.Get([]byte(id)) == nil {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		if err := runs.Delete([]byte(id)); err != nil {
			return err
		}
		ivs := tx.Bucket(bucketIntervals)
		if ivs.Bucket([]byte(id)) != nil {
			return ivs.DeleteBucket([]byte(id))
		}
		return nil
	})
}

// Import stores run r (a .phx file's) with its intervals, in one
// transaction. A run imported RUNNING is stored NOT_FINISHED: no process
// runs it here. Errors: ErrExists, a run that Check refuses.
func (s *Store) Import(r *pb.StoredRun) error {
	if err := Check(r); err != nil {
		return err
	}
	r = proto.Clone(r).(*pb.StoredRun)
	if r.GetState() == pb.RunState_RUN_STATE_RUNNING {
		r.State = pb.RunState_RUN_STATE_NOT_FINISHED
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if runs.Get([]byte(r.GetRunId())) != nil {
			return fmt.Errorf("run %s: %w (coordctl rm it first to replace it)", r.GetRunId(), ErrExists)
		}
		if err := putRun(runs, r); err != nil {
			return err
		}
		if len(r.GetIntervals()) == 0 {
			return nil
		}
		b, err := tx.Bucket(bucketIntervals).CreateBucketIfNotExists([]byte(r.GetRunId()))
		if err != nil {
			return err
		}
		for _, pr := range r.GetIntervals() {
			data, err := proto.Marshal(pr)
			if err != nil {
				return err
			}
			if err := b.Put(indexKey(pr.GetIndex()), data); err != nil {
				return err
			}
		}
		return nil
	})
}

// Filter selects runs for List; the zero Filter selects every run. Every
// field set must match.
type Filter struct {
	// Tags: the run has every one.
	Tags []string
	// Target: the plan's URL contains it.
	Target string
	// Since: accepted at or after it.
	Since time.Time
	// SearchID: the run is a step of this capacity search.
	SearchID string
	// Limit: at most this many, the newest (0: all).
	Limit int
}

func (f Filter) match(r *pb.StoredRun) bool {
	for _, t := range f.Tags {
		found := false
		for _, rt := range r.GetTags() {
			found = found || rt == t
		}
		if !found {
			return false
		}
	}
	if f.Target != "" && !strings.Contains(r.GetPlan().GetUrl(), f.Target) {
		return false
	}
	if !f.Since.IsZero() && r.GetAcceptedAtUnixNano() < f.Since.UnixNano() {
		return false
	}
	return f.SearchID == "" || r.GetSearchId() == f.SearchID
}

// List returns the runs f selects, newest first (by accept time, then
// ID), each with its summary (Summarize). Errors: a record that does not
// decode.
func (s *Store) List(f Filter) ([]*pb.RunSummary, error) {
	var out []*pb.RunSummary
	err := s.db.View(func(tx *bolt.Tx) error {
		var ids []string
		if err := tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			r := &pb.StoredRun{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("run %s: %w", k, err)
			}
			if f.match(r) {
				ids = append(ids, string(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range ids {
			r, err := getRun(tx, id, true)
			if err != nil {
				return err
			}
			sum, err := Summarize(r)
			if err != nil {
				return err
			}
			sum.Run.Intervals = nil
			sum.Run.Result = nil
			out = append(out, sum)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GetRun(), out[j].GetRun()
		if a.GetAcceptedAtUnixNano() != b.GetAcceptedAtUnixNano() {
			return a.GetAcceptedAtUnixNano() > b.GetAcceptedAtUnixNano()
		}
		return a.GetRunId() > b.GetRunId()
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, err
}

// Summarize returns r's summary: window, requests, RPS, errors and
// latency p99 of its result or, without one, of its intervals merged.
// Errors: a histogram or counters that do not decode.
func Summarize(r *pb.StoredRun) (*pb.RunSummary, error) {
	sum := &pb.RunSummary{Run: r, Intervals: int32(len(r.GetIntervals()))}
	lat := hist.New()
	if res := r.GetResult(); res != nil {
		sum.WindowS, sum.Partial = res.GetWindow().AsDuration().Seconds(), res.GetPartial()
		for _, t := range res.GetThresholds() {
			if !t.GetPass() {
				sum.ThresholdsFailed = append(sum.ThresholdsFailed, t.GetThreshold())
			}
		}
		sum.Requests = res.GetCounters().GetRequests()
		for _, n := range res.GetCounters().GetErrors() {
			sum.Errors += n
		}
		if b := res.GetHistograms().GetLatency(); len(b) > 0 {
			h, err := hist.Decode(b)
			if err != nil {
				return nil, fmt.Errorf("run %s latency: %w", r.GetRunId(), err)
			}
			lat = h
		}
	} else {
		for _, pr := range r.GetIntervals() {
			pt := pr.GetPoint()
			sum.Requests += pt.GetRequests()
			sum.Errors += pt.GetErrors()
			sum.WindowS = max(sum.WindowS, (pt.GetStart().AsDuration() + pt.GetLength().AsDuration()).Seconds())
			if b := pt.GetLatency(); len(b) > 0 {
				h, err := hist.Decode(b)
				if err != nil {
					return nil, fmt.Errorf("run %s interval %d latency: %w", r.GetRunId(), pt.GetIndex(), err)
				}
				if err := lat.Merge(h); err != nil {
					return nil, fmt.Errorf("run %s interval %d latency: %w", r.GetRunId(), pt.GetIndex(), err)
				}
			}
		}
	}
	if sum.WindowS > 0 {
		sum.Rps = float64(sum.Requests) / sum.WindowS
	}
	if lat.Count() > 0 {
		sum.P99Us = lat.ValueAtPercentile(99)
	}
	return sum, nil
}

package coordinator

import (
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// recordQueue is how many store writes of one run may wait for the
// writer before the run loop waits for it.
const recordQueue = 256

// recorder writes one run to the run store as it goes, off the run loop:
// the record at acceptance (RUNNING), each merged interval as it is
// merged, and the end (FINISHED with the result, or FAILED). A write that
// fails is logged and the run goes on. A nil recorder (no store) does
// nothing.
type recorder struct {
	st   *store.Store
	log  *slog.Logger
	base *pb.StoredRun // the record as accepted; the run loop's only
	ops  chan func() error
	done chan struct{}
}

// startRecord stores rec (RUNNING) and starts its writer; nil without a
// store. The run's owner must call finish or fail, which join the writer.
func (c *Coordinator) startRecord(rec *pb.StoredRun, log *slog.Logger) *recorder {
	if c.store == nil {
		return nil
	}
	w := &recorder{st: c.store, log: log, base: rec, ops: make(chan func() error, recordQueue), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for op := range w.ops {
			if err := op(); err != nil {
				w.log.Warn("run store write; the run goes on", "err", err)
			}
		}
	}()
	first := proto.Clone(rec).(*pb.StoredRun)
	w.ops <- func() error { return w.st.Put(first) }
	return w
}

// interval queues merged interval pr.
func (w *recorder) interval(pr *pb.Progress) {
	if w == nil {
		return
	}
	id := w.base.GetRunId()
	w.ops <- func() error { return w.st.AddInterval(id, pr) }
}

// end queues the run's final record (state, result, error) and waits for
// every write.
func (w *recorder) end(state pb.RunState, res *pb.RunResult, err error) {
	if w == nil {
		return
	}
	rec := proto.Clone(w.base).(*pb.StoredRun)
	rec.State, rec.Result, rec.EndedAtUnixNano = state, res, time.Now().UnixNano()
	if err != nil {
		rec.Error = err.Error()
	}
	w.ops <- func() error { return w.st.Put(rec) }
	close(w.ops)
	<-w.done
}

// storedPlan is plan p as results and the store keep it: redacted (no
// key, no credential header value) and without the body and CA, which
// are inputs, not results.
func storedPlan(p plan.Plan) *pb.Plan {
	pp := wire.PlanToProto(plan.Redacted(p))
	pp.Body = nil
	if pp.Tls != nil {
		pp.Tls.CaPem = nil
	}
	return pp
}

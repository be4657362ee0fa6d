package coordinator

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// activeRun is a run in progress, as StopRun finds it.
type activeRun struct {
	stopOnce sync.Once
	stop     chan struct{} // closed by requestStop
}

// requestStop asks the run to end its window now; idempotent.
func (a *activeRun) requestStop() { a.stopOnce.Do(func() { close(a.stop) }) }

// stopRequested reports whether StopRun was called for the run.
func (a *activeRun) stopRequested() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// StopRun ends the measurement window of run runID early, as a graceful
// Ctrl-C in coordctl does: once the run has started, every agent is sent a
// Stop (it stops issuing requests, lets those in flight finish, bounded by
// the plan's timeout, and sends its last intervals and Done), and RunPlan
// returns the result of the shortened window with RunResult.StoppedEarly
// set. A run whose agents still prepare (before they are sent Start) is
// abandoned instead: RunPlan returns a Canceled status error and nothing is
// measured.
// StopRun returns at once, without waiting for the result; calling it again
// changes nothing. Errors (gRPC status): InvalidArgument for an empty
// runID, NotFound when no run with that ID is in progress on this
// coordinator (never started, or already ended).
func (c *Coordinator) StopRun(runID string) error {
	if runID == "" {
		return status.Error(codes.InvalidArgument, "stop run: run_id is empty")
	}
	c.mu.Lock()
	a := c.active[runID]
	c.mu.Unlock()
	if a == nil {
		return status.Errorf(codes.NotFound, "no run %s in progress on this coordinator (it has ended, or never started)", runID)
	}
	c.log.Info("stop requested: ending the run's window early", "run_id", runID)
	a.requestStop()
	return nil
}

// register records a run in progress for StopRun; unregister forgets it
// (idempotent).
func (c *Coordinator) register(runID string) *activeRun {
	a := &activeRun{stop: make(chan struct{})}
	c.mu.Lock()
	c.active[runID] = a
	c.mu.Unlock()
	return a
}

func (c *Coordinator) unregister(runID string) {
	c.mu.Lock()
	delete(c.active, runID)
	c.mu.Unlock()
}

// newRunID returns a sortable, unique run ID: UTC time plus 6 random hex
// digits, e.g. 20261130T085012Z-3fa9c1.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

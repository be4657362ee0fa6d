package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Exit statuses of coordctl run besides 0 (success), 1 (error) and 2 (bad
// usage); README "Exit status" documents them.
const (
	// exitStoppedEarly: a first Ctrl-C (SIGINT) or SIGTERM ended the run's
	// window early. The report covers the shortened window (none when the
	// run was stopped before its start: nothing was measured).
	exitStoppedEarly = 3
	// exitPartial: the run lost an agent (--on-agent-loss abort or
	// continue), or its coordinator stalled until its agents stopped: the
	// coordinator's report covers what ran, marked partial.
	exitPartial = 4
	// exitCoordinatorLost: coordctl lost the coordinator mid-run; it
	// printed (and wrote to --json) the partial report of the intervals
	// it had received.
	exitCoordinatorLost = 5
	// exitAbandonedBase plus the signal's number (130 for SIGINT, 143 for
	// SIGTERM): a second signal abandoned the run, nothing is reported.
	exitAbandonedBase = 128
)

// stopCallTimeout bounds coordctl's StopRun call.
const stopCallTimeout = 5 * time.Second

// exitError makes coordctl exit with status code; err, when not nil, is
// printed as any error is ("coordctl: ...").
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// signalNotify and signalStop are signal.Notify and signal.Stop; tests
// replace them to deliver signals without the operating system.
var (
	signalNotify = signal.Notify
	signalStop   = signal.Stop
)

// stopper turns the signals coordctl run receives into a stop, as k6 does:
// the first SIGINT or SIGTERM asks the coordinator to end the run's window
// now (StopRun), while coordctl keeps reading the run's stream until its
// result; the second abandons the run (cancels the RunPlan call, which
// makes the coordinator cancel the run and its agents stop at once).
//
// StopRun needs the run's ID, which the coordinator sends first
// (RunAccepted; an older coordinator's first Progress also carries it): a
// signal before it arrives is remembered, and the stop is asked for as soon
// as the ID is known.
type stopper struct {
	client  pb.CoordinatorServiceClient
	out     io.Writer          // stderr; shared with the progress printer
	abandon context.CancelFunc // cancels the RunPlan call

	callCtx    context.Context // parent of StopRun calls
	callCancel context.CancelFunc
	sigs       chan os.Signal
	done       chan struct{}
	wg         sync.WaitGroup

	mu        sync.Mutex
	runID     string
	wanted    bool      // the first signal came
	called    bool      // StopRun was called
	abandoned os.Signal // the second signal, if one came
}

// newStopper starts handling SIGINT and SIGTERM for the run whose RunPlan
// call runs on ctx and is cancelled by abandon. close must be called once
// the call has returned.
func newStopper(ctx context.Context, client pb.CoordinatorServiceClient, out io.Writer, abandon context.CancelFunc) *stopper {
	s := &stopper{client: client, out: out, abandon: abandon, sigs: make(chan os.Signal, 2), done: make(chan struct{})}
	s.callCtx, s.callCancel = context.WithCancel(ctx)
	signalNotify(s.sigs, os.Interrupt, syscall.SIGTERM)
	s.wg.Add(1)
	go s.watch()
	return s
}

func (s *stopper) watch() {
	defer s.wg.Done()
	select {
	case <-s.sigs:
	case <-s.done:
		return
	}
	fmt.Fprintln(s.out, "coordctl: stopping the run early (Ctrl-C again to abandon it)")
	s.mu.Lock()
	s.wanted = true
	s.callLocked()
	s.mu.Unlock()
	select {
	case sig := <-s.sigs:
		s.mu.Lock()
		s.abandoned = sig
		s.mu.Unlock()
		s.abandon()
	case <-s.done:
	}
}

// setRunID records the run's ID (the first one given), and asks for the
// stop if a signal came before it.
func (s *stopper) setRunID(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runID == "" {
		s.runID = id
		s.callLocked()
	}
}

// callLocked calls StopRun, once, when a stop is wanted and the run's ID
// is known. Called with mu held.
func (s *stopper) callLocked() {
	if !s.wanted || s.called || s.runID == "" {
		return
	}
	s.called = true
	id := s.runID
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.callCtx, stopCallTimeout)
		defer cancel()
		_, err := s.client.StopRun(ctx, &pb.StopRunRequest{RunId: id})
		switch {
		case err == nil:
		case status.Code(err) == codes.NotFound:
			// The run ended meanwhile: its result is on its way.
		case s.callCtx.Err() != nil:
			// Abandoned, or the run's stream ended, meanwhile.
		default:
			fmt.Fprintf(s.out, "coordctl: could not stop the run early: %s; Ctrl-C again to abandon it\n", describe(err))
		}
	}()
}

// close stops handling signals (the default action applies again) and
// waits for the stopper's goroutines; a StopRun call still running is
// cancelled.
func (s *stopper) close() {
	signalStop(s.sigs)
	close(s.done)
	s.callCancel()
	s.wg.Wait()
}

// stopping reports whether a first signal came.
func (s *stopper) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wanted
}

// abandonedBy returns the signal that abandoned the run, or nil.
func (s *stopper) abandonedBy() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned
}

// abandonedStatus is the exit status of a run abandoned by sig: 128 plus
// the signal's number, as a shell reports a process killed by it.
func abandonedStatus(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return exitAbandonedBase + int(n)
	}
	return exitAbandonedBase + int(syscall.SIGINT)
}

package engine

import (
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/phalanxload/phalanx/internal/measure"
)

// h2watch ends a stream slot's stream at its deadline (the plan's
// timeout) as a timeout and resets it (RST_STREAM CANCEL), so that the
// slot waits for its stream's end alone (a channel receive, no select
// and no timer armed and stopped per request).
//
// Its timer is re-armed lazily: armed for the first stream's deadline, it
// stays armed while later streams come and go; when it fires before the
// current stream's deadline (a later stream: closed-loop deadlines only
// grow) it re-arms for that deadline. A busy slot so touches the runtime's
// timer about once per timeout instead of twice per request, and a
// stream still ends at its own deadline, to the timer's precision, as
// before.
type h2watch struct {
	mu       sync.Mutex // held by fire throughout: stop waits for it
	t        *time.Timer
	armed    time.Time // when t fires (zero: not armed)
	s        *h2session
	st       *h2stream // the stream watched (nil: none)
	deadline time.Time
	stopped  bool
	// done is the slot's stream-end channel (buffered 1): each of its
	// streams is sent one value when it ends (h2stream.done).
	done chan struct{}
}

func newH2Watch() *h2watch {
	w := &h2watch{done: make(chan struct{}, 1)}
	w.t = time.AfterFunc(time.Hour, w.fire)
	w.t.Stop()
	return w
}

// watch starts watching st on s until clear, ending it at deadline. A
// stream older than the one watched on s is not watched: the slot's
// goroutine may call this for the stream it sent after the read loop
// already chained a later one (h2chain.go), whose watch stays.
func (w *h2watch) watch(s *h2session, st *h2stream, deadline time.Time) {
	w.mu.Lock()
	if w.st != nil && w.s == s && w.st.id > st.id {
		w.mu.Unlock()
		return
	}
	w.s, w.st, w.deadline = s, st, deadline
	if w.armed.IsZero() || w.armed.After(deadline) {
		w.t.Reset(time.Until(deadline))
		w.armed = deadline
	}
	w.mu.Unlock()
}

// clear stops watching the stream (it ended); the timer stays armed.
func (w *h2watch) clear() {
	w.mu.Lock()
	w.s, w.st = nil, nil
	w.mu.Unlock()
}

// stop stops the timer for good and waits for a running fire to return:
// no goroutine of the watch outlives the slot.
func (w *h2watch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}

// fire is the timer's function: it ends the watched stream if its
// deadline has passed, else re-arms for it.
func (w *h2watch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = time.Time{}
	if w.stopped || w.st == nil {
		return
	}
	if d := time.Until(w.deadline); d > 0 {
		w.t.Reset(d)
		w.armed = w.deadline
		return
	}
	s, st := w.s, w.st
	w.s, w.st = nil, nil
	s.mu.Lock()
	timedOut := s.endStreamLocked(st.id, st, errTimeout, measure.ErrTimeout)
	s.mu.Unlock()
	if timedOut { // not ended meanwhile (or by writeBody's timeout)
		_ = s.write(func() error { return s.fr.WriteRSTStream(st.id, http2.ErrCodeCancel) })
	}
}

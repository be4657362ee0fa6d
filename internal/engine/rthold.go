package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// rtKeep bounds how long a thread stays at real-time priority after an
// instant (waitInstant) when no send comes to end it sooner: the first
// response normally does, within a round trip.
const rtKeep = 5 * time.Millisecond

// rtHold keeps the threads that waited for an instant at real-time
// priority until the engine's first send after it has been answered (or
// failed), so that the kernel cannot preempt them between the instant and
// that send (see waitInstant), and then returns them to their policy.
// Safe for concurrent use; the zero value is ready.
type rtHold struct {
	pending  atomic.Bool // a restore is waiting: read per request, so cheap
	mu       sync.Mutex
	restores []func()
}

// add keeps restore (nil: nothing to keep) until release, which runs at
// the latest rtKeep from now.
func (h *rtHold) add(restore func()) {
	if restore == nil {
		return
	}
	h.mu.Lock()
	h.restores = append(h.restores, restore)
	h.pending.Store(true)
	h.mu.Unlock()
	time.AfterFunc(rtKeep, h.release)
}

// release returns every kept thread to its policy.
func (h *rtHold) release() {
	if !h.pending.Load() {
		return
	}
	h.mu.Lock()
	rs := h.restores
	h.restores = nil
	h.pending.Store(false)
	h.mu.Unlock()
	for _, r := range rs {
		r()
	}
}

package engine

import (
	"context"

	"github.com/phalanxload/phalanx/internal/plan"
)

// connSlot is one unit of load the engine runs, with its own connection: an
// HTTP/1.1 connection (conn), or an HTTP/2 connection whose stream slots
// share it (h2conn), or an HTTP/3 connection over QUIC (h3conn). The engine keeps every slot
// in one list (Engine.slots), prepares it with dial, runs loop on one
// goroutine that it joins, and stops it with close. A new protocol is one
// more slot type and one more case in newSlotFunc, not one more list.
type connSlot interface {
	// worker returns the worker the slot belongs to (its recorder, TLS
	// configuration and schedule).
	worker() *worker
	// dial opens and handshakes a connection and makes it current
	// (Prepare; reconnect false).
	dial(ctx context.Context, reconnect bool) (*connInfo, *dialError)
	// loop sends requests paced by the engine's pacer until it says the
	// slot is done, then closes the slot's connection. It returns only
	// after every goroutine it started has exited.
	loop()
	// close closes the slot's connection and makes loop end soon. Safe to
	// call more than once and concurrently with loop and dial.
	close()
	// accounts returns the slot's issued, in-flight and last-end
	// accounting, read by Run after loop returned.
	accounts() *tally
}

// newSlotFunc returns the slot constructor of protocol p: newSlot builds
// slot j of worker w, the engine's i-th. Open loop adds slots while
// running when every one is busy (Engine.grow), each a connection with
// its stream slots in HTTP/2 and HTTP/3.
func newSlotFunc(p plan.Protocol) (newSlot func(e *Engine, w *worker, i, j int) connSlot) {
	switch p {
	case plan.H2:
		return func(e *Engine, w *worker, i, j int) connSlot { return newH2Conn(e, w, i, j) }
	case plan.H3:
		return func(e *Engine, w *worker, i, j int) connSlot { return newH3Conn(e, w, i, j) }
	}
	return func(e *Engine, w *worker, i, j int) connSlot { return newConn(e, w, i, j) }
}

var (
	_ rateConn = (*conn)(nil)
	_ connSlot = (*h2conn)(nil)
)

func (c *conn) worker() *worker   { return c.w }
func (c *conn) accounts() *tally  { return &c.tally }
func (c *h2conn) worker() *worker { return c.w }
func (c *h2conn) accounts() *tally {
	return &c.tally
}

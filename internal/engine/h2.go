package engine

import (
	"context"
	"sync/atomic"
	"time"
)

// h2conn is one HTTP/2 connection slot. (Placeholder until the HTTP/2
// client lands: New rejects HTTP/2 plans before one is built.)
type h2conn struct {
	e        *Engine
	w        *worker
	issued   atomic.Int64
	inFlight atomic.Int64
}

func newH2Conn(e *Engine, w *worker, _ int) *h2conn { return &h2conn{e: e, w: w} }

func (c *h2conn) dial(context.Context, bool) (*connInfo, *dialError) { return nil, nil }
func (c *h2conn) loop()                                              {}
func (c *h2conn) close()                                             {}
func (c *h2conn) lastEndTime() time.Time                             { return time.Time{} }

package engine

import (
	"net"
	"sync"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
)

// HTTP/3 stream slots (plan.MaxStreams, coordctl's -m with --http3): an
// h3conn runs MaxStreams stream slots on its one QUIC connection, as an
// HTTP/2 slot runs its stream slots on its session (h2.go): each a
// goroutine that sends one request at a time (serialLoop) on a request
// stream of its own, paced by the engine's pacer for the connection's
// index, so -c connections carry -c × -m requests at once in closed loop,
// and in open loop -c × -m senders take the schedule's tickets (growth
// adds connections, each with its stream slots). The server's
// initial_max_streams_bidi caps the streams open at once: a stream slot
// above it waits in quic-go's OpenRequestStream, inside its request's
// latency and timeout (quic-go does not expose the peer's limit, so it is
// not reported). A connection rate (each ticket's connection sends its
// requests back to back) and no keep-alive (one request per connection)
// keep one stream slot. The slots share the connection's bookkeeping
// under h3conn.mu: one dial at a time (the others wait for it), the
// reconnect flag, and each session's streams in use, so that a lost
// connection, or one left for a retry, is closed when its last stream
// ends and not under another slot's request.

// h3stream is one of an h3conn's stream slots besides its loop goroutine's:
// the slot with a read buffer of its own.
type h3stream struct {
	*h3conn
	buf []byte
}

// do performs one request from the stream slot (rateConn).
func (s *h3stream) do(t0 time.Time, en *entry) outcome { return s.doOn(&s.buf, t0, en) }

// streamSlots returns how many stream slots the slot runs.
func (c *h3conn) streamSlots() int {
	if p := c.e.plan; p.ConnectionRate || p.NoKeepAlive {
		return 1
	}
	return max(c.e.plan.MaxStreams, 1)
}

// loop runs the slot's stream slots, each sending one request at a time
// (serialLoop), until the pacer says they are done, then closes the
// connection.
func (c *h3conn) loop() {
	defer c.drop()
	defer c.alarm.close()
	var wg sync.WaitGroup
	for range c.streamSlots() - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := newAlarm()
			defer a.close()
			serialLoop(c.e, &h3stream{h3conn: c}, c.j, a)
		}()
	}
	serialLoop(c.e, c, c.j, c.alarm)
	wg.Wait()
}

// nextEntry returns the request one of the slot's stream slots sends next.
func (c *h3conn) nextEntry() *entry { return c.e.nextSharedEntry(c.w, &c.pos) }

// session returns the slot's current usable session with one more stream
// counted on it (release gives it back), dialling one when there is none:
// one dial at a time per slot, the others waiting for it. ci is set when
// this call dialled, hs its handshake's start; early lets the dial send in
// 0-RTT (dialH3). A session found unusable (closed by the peer, its
// idle timeout, while idle) is retired first and the dial is a reconnect.
func (c *h3conn) session(early bool) (_ *h3session, _ *connInfo, hs time.Time, _ *dialError) {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return nil, nil, hs, &dialError{measure.ErrLocal, net.ErrClosed}
		}
		if s := c.cur; s != nil {
			if s.usable() {
				s.streams++
				c.mu.Unlock()
				return s, nil, hs, nil
			}
			if c.retireLocked(s) {
				c.mu.Unlock()
				s.close()
				c.mu.Lock()
				continue
			}
		}
		if !c.dialing {
			break
		}
		c.cond.Wait()
	}
	c.dialing = true
	reconnect := c.dropped && !c.e.plan.NoKeepAlive
	c.dropped = false
	c.mu.Unlock()

	s, ci, hs, derr := dialH3(c.e.stopCtx, c.e, c.w, reconnect, early)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.dialing = false
	c.cond.Broadcast()
	if derr != nil {
		c.dropped = reconnect
		return nil, nil, hs, derr
	}
	if c.closed {
		s.close()
		return nil, nil, hs, &dialError{measure.ErrLocal, net.ErrClosed}
	}
	c.cur = s
	s.streams++
	return s, ci, hs, nil
}

// release gives back a stream of s that session counted; retire takes s
// out of use (lost, no keep-alive, left for a retry). A retired session
// is closed when its last stream is released.
func (c *h3conn) release(s *h3session, retire bool) {
	c.mu.Lock()
	s.streams--
	closeNow := false
	switch {
	case retire && !s.retired:
		closeNow = c.retireLocked(s)
	case s.retired && s.streams == 0:
		closeNow = true
		for i, r := range c.retired {
			if r == s {
				c.retired = append(c.retired[:i], c.retired[i+1:]...)
				break
			}
		}
	}
	c.mu.Unlock()
	if closeNow {
		s.close()
	}
}

// retire takes s out of use (retireLocked) while a stream of it is still
// counted: the last release closes it.
func (c *h3conn) retire(s *h3session) {
	c.mu.Lock()
	if !s.retired {
		_ = c.retireLocked(s) // false: the caller's stream is counted
	}
	c.mu.Unlock()
}

// retireLocked takes s out of use: it takes no new stream, and when it
// was current the slot's next open is a reconnect. It reports whether s
// is to be closed now (no stream of it open); otherwise it waits in
// c.retired for its last stream's release. Called with c.mu held.
func (c *h3conn) retireLocked(s *h3session) bool {
	if c.cur == s {
		c.cur = nil
		c.dropped = true
	}
	s.retired = true
	if s.streams > 0 {
		c.retired = append(c.retired, s)
		return false
	}
	return true
}

// takeAllLocked takes the slot's current and retired sessions, to close.
// Called with c.mu held.
func (c *h3conn) takeAllLocked() []*h3session {
	ss := c.retired
	c.retired = nil
	if c.cur != nil {
		ss = append(ss, c.cur)
		c.cur = nil
	}
	return ss
}

// drop closes the slot's connections (between requests: no stream of the
// slot runs).
func (c *h3conn) drop() {
	c.mu.Lock()
	ss := c.takeAllLocked()
	c.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
}

// close closes the slot's connections, failing their open streams, and
// makes loop end soon.
func (c *h3conn) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	ss := c.takeAllLocked()
	c.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
}

// connected reports whether the slot has a connection.
func (c *h3conn) connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// fresh makes the slot's next open a new connection, not a reconnect: a
// connection-rate ticket opens its own.
func (c *h3conn) fresh() {
	c.mu.Lock()
	c.dropped = false
	c.mu.Unlock()
}

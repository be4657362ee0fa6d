package engine

import (
	"net"
	"sync/atomic"
)

// h2Reads and h2Writes count the read and write calls on every HTTP/2
// session's connection (TLS records in, flushes out): the benchmarks
// report them per request (rd/req, wr/req).
var h2Reads, h2Writes atomic.Int64

type countConn struct{ net.Conn }

func (c countConn) Read(p []byte) (int, error) {
	h2Reads.Add(1)
	return c.Conn.Read(p)
}

func (c countConn) Write(p []byte) (int, error) {
	h2Writes.Add(1)
	return c.Conn.Write(p)
}

func init() { h2WrapConn = func(c net.Conn) net.Conn { return countConn{c} } }

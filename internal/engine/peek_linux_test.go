package engine

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestPeekFd: the look at an idle socket tells idle, pending bytes, and
// the peer's close (with bytes still pending, too) apart, consumes
// nothing, and allocates nothing.
func TestPeekFd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	raw, err := client.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st peekState
	look := func(fd uintptr) bool { st = peekFd(fd); return true } // built once, as conn.peekFn
	peek := func() peekState {
		if err := raw.Read(look); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// until waits (bounded) for the state the kernel reaches once the
	// server's bytes or FIN have crossed loopback.
	until := func(want peekState) peekState {
		got := peek()
		for deadline := time.Now().Add(2 * time.Second); got != want && time.Now().Before(deadline); got = peek() {
			time.Sleep(time.Millisecond)
		}
		return got
	}
	if st := peek(); st != peekIdle {
		t.Fatalf("idle connection: %v, want idle", st)
	}
	if allocs := testing.AllocsPerRun(100, func() { peek() }); allocs != 0 {
		t.Errorf("%v allocations per look, want 0", allocs)
	}
	if _, err := server.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if st := until(peekData); st != peekData {
		t.Fatalf("byte pending: %v, want data", st)
	}
	if st := peek(); st != peekData {
		t.Fatalf("second look: %v, want data still pending (nothing consumed)", st)
	}
	server.Close()
	if st := until(peekClosed); st != peekClosed {
		t.Fatalf("peer closed with a byte pending: %v, want closed", st)
	}
	buf := make([]byte, 4)
	if n, _ := client.Read(buf); n != 1 || buf[0] != 'x' {
		t.Fatalf("read %q after the looks, want the pending byte", buf[:n])
	}
}

// BenchmarkIdleLook measures the look an idle keep-alive connection gets
// before reuse (conn.closedByPeer: RawConn.Read with one poll(2)).
func BenchmarkIdleLook(b *testing.B) {
	c, _ := keepAliveConn(b, false)
	b.ReportAllocs()
	for range b.N {
		if c.closedByPeer() {
			b.Fatal("an open idle connection looked closed")
		}
	}
}

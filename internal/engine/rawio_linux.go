//go:build linux && !race

package engine

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawTCP is a TCP connection whose Read and Write make raw read(2) and
// write(2) calls (through the netpoller's RawConn, deadlines and close
// included) instead of the syscall package's. Go's syscall wrappers enter
// the scheduler's system-call state, and the first such entry after every
// processor has been idle wakes the runtime's monitor thread (sysmon),
// which then sleeps again: two more context switches per wake-up of an
// idle agent, a quarter to a half of its CPU per request at a fixed rate
// (BenchmarkOpenLoopCost). The socket is non-blocking, so these calls
// never block a thread. Everything else (deadlines, Close, SyscallConn)
// is the TCPConn's. Read and Write may run concurrently (HTTP/2's reader
// and flusher): each has its own state, and the functions handed to the
// RawConn are made once (a closure per call would allocate).
//
// Built without the race detector only: the syscall package tells it
// that a write to a descriptor happens before a later read, which tests
// rely on between an in-process client and server; raw calls would not.
type rawTCP struct {
	*net.TCPConn
	rc syscall.RawConn

	rb      []byte
	rn      int
	rerrno  syscall.Errno
	readFn  func(fd uintptr) bool
	wb      []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
}

// rawIO wraps c as a rawTCP, or returns it as it is when it is no
// *net.TCPConn.
func rawIO(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawTCP{TCPConn: tc, rc: rc}
	r.readFn = r.read
	r.writeFn = r.write
	return r
}

// read is the RawConn's read function: false to wait for readability.
func (r *rawTCP) read(fd uintptr) bool {
	for {
		m, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rb[0])), uintptr(len(r.rb)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.rn, r.rerrno = int(m), e
		return true
	}
}

// write is the RawConn's write function: false to wait for writability.
func (r *rawTCP) write(fd uintptr) bool {
	for r.wn < len(r.wb) {
		p := r.wb[r.wn:]
		m, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			r.wn += int(m)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			r.werrno = e
			return true
		}
	}
	return true
}

func (r *rawTCP) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.rb, r.rn, r.rerrno = b, 0, 0
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerrno
	r.rb = nil
	switch {
	case err != nil:
		return 0, r.opError("read", err)
	case errno != 0:
		return 0, r.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawTCP) Write(b []byte) (int, error) {
	r.wb, r.wn, r.werrno = b, 0, 0
	err := r.rc.Write(r.writeFn)
	n, errno := r.wn, r.werrno
	r.wb = nil
	switch {
	case err != nil:
		return n, r.opError("write", err)
	case errno != 0:
		return n, r.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError wraps err as the net package does its own I/O errors.
func (r *rawTCP) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
}

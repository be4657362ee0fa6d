package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekFd looks at socket fd without blocking or consuming anything: one
// poll(2) with a zero timeout for POLLIN and POLLRDHUP. It reports
// peekClosed when the peer has closed its side (its FIN: POLLRDHUP, set
// even with bytes still pending) or the socket is hung up or in error (a
// reset), peekData when bytes are pending and the peer has not closed,
// and peekIdle otherwise (or when poll fails). It allocates nothing. A
// raw system call (a zero timeout never blocks): it does not wake the
// runtime's monitor thread (see rawTCP).
func peekFd(fd uintptr) peekState {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	ts := unix.Timespec{}
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 || n == 0 {
		return peekIdle
	}
	switch ev := fds[0].Revents; {
	case ev&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0:
		return peekClosed
	case ev&unix.POLLIN != 0:
		return peekData
	}
	return peekIdle
}

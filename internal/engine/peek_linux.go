package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekFd looks at socket fd without blocking or consuming anything: one
// recv(2) of a byte with MSG_PEEK|MSG_DONTWAIT into b. It reports
// peekIdle when nothing is pending (EAGAIN), peekData when bytes are,
// and peekClosed when the peer closed (a zero-byte read: its FIN) or the
// socket holds an error (a reset). It allocates nothing.
func peekFd(fd uintptr, b *[1]byte) peekState {
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		return peekIdle
	case errno != 0 || n == 0:
		return peekClosed
	}
	return peekData
}

package engine

import "golang.org/x/sys/unix"

// peekFd looks at socket fd without blocking or consuming anything: one
// poll(2) with a zero timeout for POLLIN and POLLRDHUP. It reports
// peekClosed when the peer has closed its side (its FIN: POLLRDHUP, set
// even with bytes still pending) or the socket is hung up or in error (a
// reset), peekData when bytes are pending and the peer has not closed,
// and peekIdle otherwise (or when poll fails). It allocates nothing.
func peekFd(fd uintptr) peekState {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	n, err := unix.Poll(fds[:], 0)
	if err != nil || n == 0 {
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

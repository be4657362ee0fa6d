//go:build !linux

package engine

// peekFd reports peekIdle: outside Linux the engine does not look at an
// idle connection before reusing it, and a request the server never
// received on it is resent once (conn.do).
func peekFd(fd uintptr) peekState { return peekIdle }

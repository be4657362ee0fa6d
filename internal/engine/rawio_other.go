//go:build !linux || race

package engine

import "net"

// rawIO returns c: raw system calls are used on Linux only, and not with
// the race detector (rawio_linux.go says why).
func rawIO(c net.Conn) net.Conn { return c }

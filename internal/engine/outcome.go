package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/phalanxload/phalanx/internal/http1"
	"github.com/phalanxload/phalanx/internal/measure"
)

// protocolError marks a malformed response (internal/http1's type, shared
// by the HTTP/2 client).
type protocolError = http1.ProtocolError

// classify maps a request's I/O error to its kind. started reports whether
// any byte of the response had been read.
func classify(err error, started bool) measure.ErrorKind {
	var pe *protocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		return measure.ErrProtocol
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return measure.ErrTimeout
	case errors.As(err, &ne) && ne.Timeout():
		return measure.ErrTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return measure.ErrReset
	case errors.Is(err, syscall.EPIPE):
		return measure.ErrClosed
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return measure.ErrPorts
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOBUFS):
		return measure.ErrLocal
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		if started {
			return measure.ErrTruncated
		}
		return measure.ErrClosed
	}
	var ae tls.AlertError
	var re tls.RecordHeaderError
	if errors.As(err, &ae) || errors.As(err, &re) {
		return measure.ErrTLS
	}
	if started {
		return measure.ErrTruncated
	}
	return measure.ErrClosed
}

// classifyDial maps a dial or handshake error.
func classifyDial(err error, handshake bool) measure.ErrorKind {
	switch {
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return measure.ErrPorts
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOBUFS):
		return measure.ErrLocal
	case handshake:
		return measure.ErrTLS
	}
	return measure.ErrConnect
}

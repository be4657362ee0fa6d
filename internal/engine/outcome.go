package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// ErrorKind classifies a failed request. Every failed request has exactly
// one kind.
type ErrorKind uint8

// Error kinds, in report order.
const (
	// ErrConnect: the TCP connection could not be opened.
	ErrConnect ErrorKind = iota
	// ErrTLS: the TLS handshake failed.
	ErrTLS
	// ErrTimeout: the request did not end within the plan's timeout.
	ErrTimeout
	// ErrReset: the peer reset the connection (RST).
	ErrReset
	// ErrClosed: the peer closed the connection before any response byte.
	ErrClosed
	// ErrTruncated: the peer closed the connection inside a response.
	ErrTruncated
	// ErrProtocol: the response was not valid HTTP/1.x.
	ErrProtocol
	// ErrLocal: a client-side limit or failure (file descriptors, ports).
	ErrLocal
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{"connect", "tls", "timeout", "reset", "closed", "truncated", "protocol", "local"}

// String returns the kind's report name (lowercase, e.g. "reset").
func (k ErrorKind) String() string {
	if k < numErrorKinds {
		return errorKindNames[k]
	}
	return "unknown"
}

// protocolError marks a malformed response.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "protocol: " + e.msg }

// classify maps a request's I/O error to its kind. started reports whether
// any byte of the response had been read.
func classify(err error, started bool) ErrorKind {
	var pe *protocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		return ErrProtocol
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.As(err, &ne) && ne.Timeout():
		return ErrTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return ErrReset
	case errors.Is(err, syscall.EPIPE):
		return ErrClosed
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.ENOBUFS):
		return ErrLocal
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		if started {
			return ErrTruncated
		}
		return ErrClosed
	}
	var ae tls.AlertError
	var re tls.RecordHeaderError
	if errors.As(err, &ae) || errors.As(err, &re) {
		return ErrTLS
	}
	if started {
		return ErrTruncated
	}
	return ErrClosed
}

// classifyDial maps a dial or handshake error.
func classifyDial(err error, handshake bool) ErrorKind {
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.ENOBUFS):
		return ErrLocal
	case handshake:
		return ErrTLS
	}
	return ErrConnect
}

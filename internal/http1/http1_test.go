package http1

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadResponse: body lengths by RFC 9112 section 6.3, interim
// responses, connection reuse, wire byte counts, and the error for each
// malformed or cut response.
func TestReadResponse(t *testing.T) {
	const (
		ok = iota
		eof
		cut
		bad
	)
	for _, tc := range []struct {
		name   string
		in     string
		head   bool
		status int
		close  bool
		rest   string // what must remain unread (the next response)
		want   int
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", status: 200, rest: "NEXT"},
		{name: "chunked with trailers", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT", status: 200, rest: "NEXT"},
		{name: "close delimited", in: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + strings.Repeat("x", 1000), status: 200, close: true},
		{name: "head with length", in: "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nNEXT", head: true, status: 200, rest: "NEXT"},
		{name: "304 with length", in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nNEXT", status: 304, rest: "NEXT"},
		{name: "103 then 200", in: "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT", status: 200, rest: "NEXT"},
		{name: "http/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nokNEXT", status: 200, rest: "NEXT"},
		{name: "truncated body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", want: cut},
		{name: "closed before response", in: "", want: eof},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\r\n\r\n", want: bad},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", want: bad},
		{name: "line too long", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxLine) + "\r\n\r\n", want: bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 64)
			var res Response
			started := false
			err := ReadResponse(r, tc.head, &res, &started)
			var pe *ProtocolError
			switch tc.want {
			case eof:
				if !errors.Is(err, io.EOF) || started {
					t.Fatalf("ReadResponse = %v (started %v), want io.EOF before any byte", err, started)
				}
				return
			case cut:
				if !errors.Is(err, io.ErrUnexpectedEOF) || !started {
					t.Fatalf("ReadResponse = %v (started %v), want io.ErrUnexpectedEOF", err, started)
				}
				return
			case bad:
				if !errors.As(err, &pe) {
					t.Fatalf("ReadResponse = %v, want a *ProtocolError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadResponse: %v", err)
			}
			if res.Status != tc.status || res.Close != tc.close || res.First.IsZero() {
				t.Fatalf("status, close, first = %d, %v, %v; want %d, %v, set", res.Status, res.Close, res.First, tc.status, tc.close)
			}
			rest, _ := io.ReadAll(r)
			if string(rest) != tc.rest {
				t.Fatalf("left unread %q, want %q", rest, tc.rest)
			}
			if want := int64(len(tc.in) - len(tc.rest)); res.WireBytes != want {
				t.Fatalf("WireBytes = %d, want %d", res.WireBytes, want)
			}
		})
	}
}

func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		r := bufio.NewReaderSize(strings.NewReader(string(in)), 64)
		var res Response
		started := false
		err := ReadResponse(r, head, &res, &started)
		if res.WireBytes > int64(len(in)) {
			t.Fatalf("wireBytes %d > input %d", res.WireBytes, len(in))
		}
		if err == nil && (res.Status < 100 || res.Status > 999) {
			t.Fatalf("accepted status %d", res.Status)
		}
	})
}

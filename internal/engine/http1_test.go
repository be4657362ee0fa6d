package engine

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/http1"
	"github.com/phalanxload/phalanx/internal/measure"
)

// TestReadResponse: internal/http1's parser and the engine's classification
// of its errors, together (the parser's own tests are in internal/http1).
func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		head     bool
		status   int
		close    bool
		rest     string // what must remain unread (the next response)
		wantKind measure.ErrorKind
		wantErr  bool
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", status: 200, rest: "NEXT"},
		{name: "chunked with trailers", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT", status: 200, rest: "NEXT"},
		{name: "close delimited", in: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + strings.Repeat("x", 1000), status: 200, close: true},
		{name: "head with length", in: "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nNEXT", head: true, status: 200, rest: "NEXT"},
		{name: "204", in: "HTTP/1.1 204 No Content\r\n\r\nNEXT", status: 204, rest: "NEXT"},
		{name: "304 with length", in: "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\nNEXT", status: 304, rest: "NEXT"},
		{name: "103 then 200", in: "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", status: 200, rest: "NEXT"},
		{name: "http/1.0 no keep-alive", in: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, close: true},
		{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 2\n\nokNEXT", status: 200, rest: "NEXT"},
		{name: "truncated body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", wantErr: true, wantKind: measure.ErrTruncated},
		{name: "truncated chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n01234", wantErr: true, wantKind: measure.ErrTruncated},
		{name: "closed before response", in: "", wantErr: true, wantKind: measure.ErrClosed},
		{name: "garbage", in: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: true, wantKind: measure.ErrProtocol},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: true, wantKind: measure.ErrProtocol},
		{name: "conflicting lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", wantErr: true, wantKind: measure.ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 64)
			var res http1.Response
			started := false
			err := http1.ReadResponse(r, tc.head, &res, &started)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ReadResponse = %+v, nil; want error", res)
				}
				if k := classify(err, started); k != tc.wantKind {
					t.Fatalf("classify(%v) = %v, want %v", err, k, tc.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadResponse: %v", err)
			}
			if res.Status != tc.status || res.Close != tc.close {
				t.Fatalf("status, close = %d, %v; want %d, %v", res.Status, res.Close, tc.status, tc.close)
			}
			rest, _ := io.ReadAll(r)
			if string(rest) != tc.rest {
				t.Fatalf("left unread %q, want %q", rest, tc.rest)
			}
			if want := int64(len(tc.in) - len(tc.rest)); res.WireBytes != want {
				t.Fatalf("wireBytes = %d, want %d", res.WireBytes, want)
			}
		})
	}
}

func TestClassifyEOF(t *testing.T) {
	if k := classify(io.EOF, false); k != measure.ErrClosed {
		t.Errorf("classify(EOF, not started) = %v", k)
	}
	if k := classify(io.ErrUnexpectedEOF, true); k != measure.ErrTruncated {
		t.Errorf("classify(UnexpectedEOF, started) = %v", k)
	}
	if k := classify(&protocolError{Msg: "x"}, true); k != measure.ErrProtocol {
		t.Errorf("classify(protocol) = %v", k)
	}
}

package http1

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/measure"
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
		{name: "line too long", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", MaxLine) + "\r\n\r\n", want: bad},
		{name: "40 KiB header line", in: "HTTP/1.1 200 OK\r\nContent-Security-Policy: " + strings.Repeat("a", 40<<10) + "\r\nContent-Length: 2\r\n\r\nokNEXT", status: 200, rest: "NEXT"},
		{name: "long significant header", in: "HTTP/1.1 200 OK\r\nConnection: " + strings.Repeat("x, ", 10<<10) + "close\r\nContent-Length: 2\r\n\r\nok", status: 200, close: true},
		{name: "long chunk extension and trailer", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=" + strings.Repeat("e", 20<<10) + "\r\nok\r\n0\r\nX-T: " + strings.Repeat("t", 20<<10) + "\r\n\r\nNEXT", status: 200, rest: "NEXT"},
		{name: "long line cut", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 1000), want: cut},
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

// TestLongHeaders: header lines longer than the reader's buffer are
// accepted up to MaxLine, and the header section up to MaxHeaderBytes;
// beyond, the error is a *ProtocolError naming the limit. A connection
// reading long headers again allocates nothing more.
func TestLongHeaders(t *testing.T) {
	read := func(in string, res *Response) error {
		started := false
		return ReadResponse(bufio.NewReaderSize(strings.NewReader(in), 16<<10), false, res, &started)
	}
	resp := func(lines ...string) string {
		return "HTTP/1.1 200 OK\r\n" + strings.Join(lines, "") + "Content-Length: 2\r\n\r\nok"
	}
	header := func(size int) string { // one header line of size bytes, CRLF included
		return "X-Big: " + strings.Repeat("v", size-len("X-Big: \r\n")) + "\r\n"
	}
	var res Response
	for _, size := range []int{16<<10 - 1, 16 << 10, 16<<10 + 1, 40 << 10, MaxLine} {
		in := resp(header(size))
		if err := read(in, &res); err != nil || res.Status != 200 || res.WireBytes != int64(len(in)) {
			t.Errorf("%d-byte header line: status %d, %d wire bytes, %v; want 200, %d, nil", size, res.Status, res.WireBytes, err, len(in))
		}
	}
	var pe *ProtocolError
	err := read(resp(header(MaxLine+1)), &res)
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "128 KiB") || !strings.Contains(err.Error(), "MaxLine") {
		t.Errorf("header line of MaxLine+1 bytes: %v, want a protocol error naming the 128 KiB MaxLine", err)
	}
	var lines []string
	for total := 0; total <= MaxHeaderBytes; total += 64 << 10 {
		lines = append(lines, header(64<<10))
	}
	err = read(resp(lines...), &res)
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "512 KiB") || !strings.Contains(err.Error(), "MaxHeaderBytes") {
		t.Errorf("header section over MaxHeaderBytes in 64 KiB lines: %v, want a protocol error naming the 512 KiB MaxHeaderBytes", err)
	}
	if err := read(resp(lines[:7]...), &res); err != nil {
		t.Errorf("header section of 7 x 64 KiB: %v, want accepted", err)
	}

	in := resp(header(40<<10), header(20<<10))
	src := strings.NewReader(in)
	r := bufio.NewReaderSize(src, 16<<10)
	allocs := testing.AllocsPerRun(50, func() {
		src.Reset(in)
		r.Reset(src)
		started := false
		if err := ReadResponse(r, false, &res, &started); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per response with long headers, want 0 after the first", allocs)
	}
}

// TestHeaderBodySplit: a response's wire bytes split into its header
// sections (interim responses and trailers included), its body without
// chunk framing, and the rest (chunk framing); its Content-Encoding.
func TestHeaderBodySplit(t *testing.T) {
	for _, tc := range []struct {
		name               string
		in                 string
		header, body, wire int64
		enc                measure.Encoding
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Encoding: br\r\n\r\nhello", 60, 5, 65, measure.EncBrotli},
		{"103 then 200", "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 28 + 38, 2, 28 + 38 + 2, measure.EncIdentity},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-encoding: gzip\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", 71 + 8, 3, 71 + 8 + 3 + 10, measure.EncGzip},
		{"close delimited", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789", 38, 10, 48, measure.EncIdentity},
	} {
		var res Response
		var started bool
		if err := ReadResponse(bufio.NewReader(strings.NewReader(tc.in)), false, &res, &started); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.HeaderBytes != tc.header || res.BodyBytes != tc.body || res.WireBytes != tc.wire || res.Encoding != tc.enc {
			t.Errorf("%s: header %d, body %d, wire %d, encoding %v; want %d, %d, %d, %v", tc.name,
				res.HeaderBytes, res.BodyBytes, res.WireBytes, res.Encoding, tc.header, tc.body, tc.wire, tc.enc)
		}
	}
}

// TestLocation: with WantLocation, the final response's Location is kept
// (an interim response's is not); without it, none is.
func TestLocation(t *testing.T) {
	in := "HTTP/1.1 103 Early Hints\r\nLocation: /early\r\n\r\n" +
		"HTTP/1.1 302 Found\r\nlocation:  /next?a=1 \r\nContent-Length: 0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	br := bufio.NewReader(strings.NewReader(in + in))
	var res Response
	var started bool
	res.WantLocation = true
	for _, want := range []string{"/next?a=1", ""} {
		if err := ReadResponse(br, false, &res, &started); err != nil || string(res.Location) != want {
			t.Fatalf("ReadResponse: status %d, Location %q, %v; want %q", res.Status, res.Location, err, want)
		}
	}
	res.WantLocation = false
	if err := ReadResponse(br, false, &res, &started); err != nil || res.Status != 302 || len(res.Location) != 0 {
		t.Fatalf("without WantLocation: status %d, Location %q, %v; want 302 and none", res.Status, res.Location, err)
	}
}

package http1

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// BenchmarkReadResponse parses a typical response (eight header lines, a
// 600-byte body) from memory through a 16 KiB bufio.Reader, as the engine
// reads one.
func BenchmarkReadResponse(b *testing.B) {
	in := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Tue, 01 Dec 2026 22:00:00 GMT\r\nContent-Type: text/html\r\n" +
		"Content-Length: 600\r\nLast-Modified: Tue, 01 Dec 2026 21:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"abc-258\"\r\n" +
		"Accept-Ranges: bytes\r\n\r\n" + strings.Repeat("x", 600))
	src := bytes.NewReader(in)
	r := bufio.NewReaderSize(src, 16<<10)
	var res Response
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for range b.N {
		src.Reset(in)
		r.Reset(src)
		started := false
		if err := ReadResponse(r, false, &res, &started); err != nil {
			b.Fatal(err)
		}
	}
}

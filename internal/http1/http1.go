package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
)

// Response is what ReadResponse learned about one HTTP/1.x response.
type Response struct {
	// Status is the final (non-1xx) status code.
	Status int
	// WireBytes counts every byte of the response as read from the
	// connection: interim responses, status line, headers, chunk framing,
	// trailers and body.
	WireBytes int64
	// HeaderBytes counts the header sections' part of WireBytes: status
	// lines and header fields with their terminators, interim responses'
	// and the trailer section's included. BodyBytes counts the body as
	// received (still content-encoded), without chunk framing.
	HeaderBytes, BodyBytes int64
	// Encoding is the final response's Content-Encoding (its last
	// coding; measure.EncIdentity without one).
	Encoding measure.Encoding
	// Close reports that the connection cannot be reused: the server said
	// Connection: close, spoke HTTP/1.0 without keep-alive, or delimited the
	// body by closing.
	Close bool
	// First is when the first status line had been read (time to first
	// byte, within a read).
	First time.Time

	// WantLocation asks ReadResponse to keep the final response's Location
	// header in Location (the engine's --max-redirects); without it the
	// header is not looked at. The caller sets it; ReadResponse keeps it.
	WantLocation bool
	// Location is the final response's Location field value, trimmed
	// (empty without one, or without WantLocation). Its memory is reused
	// by the next ReadResponse: copy what must outlive it.
	Location []byte

	// long holds a line longer than the reader's buffer while it is
	// parsed; kept across calls (ReadResponse leaves it), so a connection
	// whose responses carry long headers allocates it once.
	long []byte
}

// ProtocolError marks a malformed response (or, for the HTTP/2 client
// that shares it, a malformed frame or header).
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "protocol: " + e.Msg }

// Limits on a response's framing, beyond which ReadResponse returns a
// *ProtocolError naming the limit. Lines up to the bufio.Reader's size
// (the engine's is 16 KiB) are parsed in place; longer ones are gathered
// in a buffer kept in the Response. curl accepts 100 KiB per header line
// and wrk about 80 KB; big Content-Security-Policy, Link or Set-Cookie
// headers pass 16 KiB.
const (
	// MaxLine bounds one status, header, chunk-size or trailer line,
	// terminator included: 128 KiB.
	MaxLine = 128 << 10
	// MaxHeaderBytes bounds one response's header section (status line
	// and header lines, terminators included; each interim response's
	// apart) and, apart, its trailer section: 512 KiB.
	MaxHeaderBytes = 512 << 10
)

// ReadResponse reads one whole response to a request with the given method
// from r, following RFC 9112 section 6.3 for the message body length:
// HEAD, 1xx, 204 and 304 have no body; then chunked; then Content-Length;
// otherwise the body runs to connection close. Interim 1xx responses (other
// than 101) are read and skipped. It allocates nothing in steady state.
//
// started is set once the first response byte has been read, so that the
// caller can tell "closed before response" from "truncated".
func ReadResponse(r *bufio.Reader, head bool, res *Response, started *bool) error {
	*res = Response{long: res.long, WantLocation: res.WantLocation, Location: res.Location[:0]}
	var loc *[]byte
	if res.WantLocation {
		loc = &res.Location
	}
	for {
		section := res.WireBytes
		line, err := readLine(r, &res.WireBytes, &res.long)
		if len(line) > 0 || res.WireBytes > 0 {
			*started = true
		}
		if err != nil {
			return err
		}
		if res.First.IsZero() {
			res.First = time.Now()
		}
		major, minor, status, ok := parseStatusLine(line)
		if !ok {
			return &ProtocolError{"bad status line"}
		}
		if loc != nil {
			res.Location = res.Location[:0] // an interim response's is not the final one's
		}
		h, err := readHeaders(r, &res.WireBytes, &res.long, section, loc)
		res.HeaderBytes += res.WireBytes - section
		if err != nil {
			return err
		}
		if status >= 100 && status < 200 && status != 101 {
			continue // interim response: the final one follows
		}
		if status == 101 {
			return &ProtocolError{"unexpected 101 Switching Protocols"}
		}
		res.Status = status
		res.Close = h.close || (major == 1 && minor == 0 && !h.keepAlive)
		res.Encoding = h.encoding
		switch {
		case head || status == 204 || status == 304:
			return nil
		case h.chunked:
			return readChunked(r, res)
		case h.contentLength >= 0:
			n, err := r.Discard(int(h.contentLength))
			res.WireBytes += int64(n)
			res.BodyBytes += int64(n)
			if err != nil {
				return truncated(err)
			}
			return nil
		default:
			// Delimited by close (RFC 9112 6.3 rule 8): read to EOF.
			res.Close = true
			for {
				n, err := r.Discard(r.Size())
				res.WireBytes += int64(n)
				res.BodyBytes += int64(n)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
			}
		}
	}
}

// truncated turns an EOF inside a body into io.ErrUnexpectedEOF.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// errLineTooLong and errHeaderTooLarge name the limits.
var (
	errLineTooLong    = &ProtocolError{"response line longer than 128 KiB (http1.MaxLine)"}
	errHeaderTooLarge = &ProtocolError{"response header section larger than 512 KiB (http1.MaxHeaderBytes)"}
)

// readLine returns one CRLF- or LF-terminated line without its terminator.
// The slice is valid until the next read. A line longer than r's buffer is
// gathered in *long, up to MaxLine.
func readLine(r *bufio.Reader, n *int64, long *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	*n += int64(len(line))
	if err != nil {
		if err == bufio.ErrBufferFull {
			line, err = readLongLine(r, n, long, line)
			if err != nil {
				return nil, err
			}
			return trimEOL(line), nil
		}
		if len(line) > 0 || *n > 0 {
			return line, truncated(err)
		}
		return line, err
	}
	return trimEOL(line), nil
}

// trimEOL drops a line's LF and a CR before it.
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// readLongLine gathers a line whose first part (a full buffer) is first,
// up to its LF, in *long.
func readLongLine(r *bufio.Reader, n *int64, long *[]byte, first []byte) ([]byte, error) {
	buf := append((*long)[:0], first...)
	for {
		part, err := r.ReadSlice('\n')
		*n += int64(len(part))
		if len(buf)+len(part) > MaxLine {
			*long = buf[:0]
			return nil, errLineTooLong
		}
		buf = append(buf, part...)
		switch {
		case err == nil:
			*long = buf[:0]
			return buf, nil
		case err != bufio.ErrBufferFull:
			*long = buf[:0]
			return nil, truncated(err)
		}
	}
}

// parseStatusLine parses "HTTP/1.x NNN reason".
func parseStatusLine(b []byte) (major, minor, status int, ok bool) {
	if len(b) < 12 || !bytes.HasPrefix(b, []byte("HTTP/")) || b[6] != '.' || b[8] != ' ' {
		return 0, 0, 0, false
	}
	if b[5] < '0' || b[5] > '9' || b[7] < '0' || b[7] > '9' {
		return 0, 0, 0, false
	}
	major, minor = int(b[5]-'0'), int(b[7]-'0')
	if major != 1 {
		return 0, 0, 0, false
	}
	for _, c := range b[9:12] {
		if c < '0' || c > '9' {
			return 0, 0, 0, false
		}
		status = status*10 + int(c-'0')
	}
	if len(b) > 12 && b[12] != ' ' {
		return 0, 0, 0, false
	}
	return major, minor, status, status >= 100
}

// headerInfo is what the body length rules need from the header section.
type headerInfo struct {
	contentLength int64 // -1 when absent
	chunked       bool
	close         bool
	keepAlive     bool
	encoding      measure.Encoding
}

// readHeaders reads header fields up to the empty line. The section began
// at wire offset section (its status line's), and may not pass
// MaxHeaderBytes. With loc non-nil, a Location field's value is copied
// into *loc.
func readHeaders(r *bufio.Reader, n *int64, long *[]byte, section int64, loc *[]byte) (headerInfo, error) {
	h := headerInfo{contentLength: -1}
	for {
		line, err := readLine(r, n, long)
		if err != nil {
			return h, truncated(err)
		}
		if *n-section > MaxHeaderBytes {
			return h, errHeaderTooLarge
		}
		if len(line) == 0 {
			return h, nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return h, &ProtocolError{"bad header line"}
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case asciiEqualFold(name, "content-length"):
			v, ok := parseDecimal(value)
			if !ok || (h.contentLength >= 0 && h.contentLength != v) {
				return h, &ProtocolError{"bad Content-Length"}
			}
			h.contentLength = v
		case asciiEqualFold(name, "transfer-encoding"):
			// chunked must be the final coding (RFC 9112 6.1).
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = bytes.TrimSpace(value[i+1:])
			}
			if !asciiEqualFold(last, "chunked") {
				// Not chunked: the body runs to close.
				h.close = true
				continue
			}
			h.chunked = true
		case asciiEqualFold(name, "content-encoding"):
			h.encoding = measure.EncodingOf(value)
		case asciiEqualFold(name, "connection"):
			if containsToken(value, "close") {
				h.close = true
			}
			if containsToken(value, "keep-alive") {
				h.keepAlive = true
			}
		case loc != nil && asciiEqualFold(name, "location"):
			*loc = append((*loc)[:0], value...)
		}
	}
}

// readChunked reads a chunked body and its trailer section (at most
// MaxHeaderBytes) into res's counts.
func readChunked(r *bufio.Reader, res *Response) error {
	n, long := &res.WireBytes, &res.long
	for {
		line, err := readLine(r, n, long)
		if err != nil {
			return truncated(err)
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions are ignored
		}
		size, ok := parseHex(bytes.TrimSpace(line))
		if !ok {
			return &ProtocolError{"bad chunk size"}
		}
		if size == 0 {
			// Trailer section, ended by an empty line.
			section := *n
			for {
				before := *n
				line, err := readLine(r, n, long)
				if err != nil {
					return truncated(err)
				}
				if *n-section > MaxHeaderBytes {
					return errHeaderTooLarge
				}
				if len(line) == 0 {
					// The trailer fields are header bytes; the CRLF that
					// ends the chunked body is framing (RFC 9112 7.1).
					res.HeaderBytes += before - section
					return nil
				}
			}
		}
		d, err := r.Discard(int(size))
		*n += int64(d)
		res.BodyBytes += int64(d)
		if err != nil {
			return truncated(err)
		}
		line, err = readLine(r, n, long)
		if err != nil {
			return truncated(err)
		}
		if len(line) != 0 {
			return &ProtocolError{"missing CRLF after chunk"}
		}
	}
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// asciiEqualFold compares b with the lowercase ASCII string s.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// containsToken reports whether a comma-separated list holds token
// (case-insensitive).
func containsToken(list []byte, token string) bool {
	for len(list) > 0 {
		var item []byte
		if i := bytes.IndexByte(list, ','); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			item, list = list, nil
		}
		if asciiEqualFold(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}

package measure

import "fmt"

// Encoding is a response's Content-Encoding (RFC 9110 section 8.4), as
// counted: the codings a load test meets by name, and Other for the rest.
// A response with several codings ("gzip, br") counts as its last, the
// outermost one applied.
type Encoding uint8

// Encodings, in report order.
const (
	// EncIdentity: no Content-Encoding header (or "identity").
	EncIdentity Encoding = iota
	EncGzip
	EncBrotli
	EncDeflate
	EncZstd
	EncCompress
	// EncOther: any other coding.
	EncOther
	// NumEncodings is the number of encodings (not an encoding).
	NumEncodings
)

var encodingNames = [NumEncodings]string{"identity", "gzip", "br", "deflate", "zstd", "compress", "other"}

// String returns the encoding's report name: the coding's token as in the
// header ("br"), "identity" or "other"; "unknown" outside the encodings.
func (e Encoding) String() string {
	if e < NumEncodings {
		return encodingNames[e]
	}
	return "unknown"
}

// ParseEncoding returns the encoding named name (String's inverse).
// Errors: a name that is no encoding's.
func ParseEncoding(name string) (Encoding, error) {
	for e, n := range encodingNames {
		if n == name {
			return Encoding(e), nil
		}
	}
	return 0, fmt.Errorf("unknown content encoding %q", name)
}

// EncodingOf classifies a Content-Encoding header value without
// allocating: its last comma-separated coding, matched case-insensitively
// ("x-gzip" is gzip, RFC 9110 section 8.4.1.3); an empty value is identity.
func EncodingOf[T string | []byte](value T) Encoding {
	end := len(value)
	for end > 0 && (value[end-1] == ' ' || value[end-1] == '\t' || value[end-1] == ',') {
		end--
	}
	start := end
	for start > 0 && value[start-1] != ',' {
		start--
	}
	for start < end && (value[start] == ' ' || value[start] == '\t') {
		start++
	}
	v := value[start:end]
	for e := EncIdentity; e < EncOther; e++ {
		if foldEqual(v, encodingNames[e]) {
			return e
		}
	}
	switch {
	case len(v) == 0:
		return EncIdentity
	case foldEqual(v, "x-gzip"):
		return EncGzip
	case foldEqual(v, "x-compress"):
		return EncCompress
	}
	return EncOther
}

// foldEqual compares b with the lowercase ASCII string s, ignoring ASCII
// case.
func foldEqual[T string | []byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
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

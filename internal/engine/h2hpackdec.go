package engine

import (
	"errors"

	"golang.org/x/net/http2/hpack"
)

// hpackDecoder decodes a session's HPACK response header blocks (RFC
// 7541): every field representation, the dynamic table and its size
// updates, integers and strings, Huffman-coded or not. It keeps the
// strings it decoded in a small cache keyed by their encoded bytes, so a
// value the server sends again (Content-Type, ETag, Last-Modified on
// every response, Date for a second) is neither Huffman-decoded nor
// allocated again. x/net's hpack.Decoder did both for every field: at a
// fixed HTTP/2 rate against NGINX that was a sixth of the agent's CPU.
// Huffman decoding itself is x/net's (hpack.HuffmanDecodeToString). It
// is not safe for concurrent use (the session's read loop owns it).
type hpackDecoder struct {
	// dyn is the dynamic table, oldest entry first (index 62 is the
	// last); size is the sum of its entries' sizes (RFC 7541 section
	// 4.1), max the table's current maximum, limit the most a size update
	// may set (our SETTINGS_HEADER_TABLE_SIZE).
	dyn   []hpackEntry
	size  int
	max   int
	limit int
	// huff and plain cache decoded strings by their encoded bytes
	// (Huffman-coded and raw); each is emptied when it holds
	// hpackCacheEntries.
	huff, plain map[string]string
}

type hpackEntry struct{ name, value string }

// hpackCacheEntries bounds each string cache: a server's distinct
// header values over a second are far fewer; a server sending more
// (unique cookies, request IDs) empties it now and then and decodes as
// x/net did.
const hpackCacheEntries = 256

// hpackMaxString bounds one string (as SetMaxStringLength did).
const hpackMaxString = 1 << 20

var errHPACK = errors.New("hpack: malformed header block")

func newHPACKDecoder(tableSize int) *hpackDecoder {
	return &hpackDecoder{max: tableSize, limit: tableSize, huff: map[string]string{}, plain: map[string]string{}}
}

// decode decodes one complete header block, calling emit for each field
// in order. Errors (any malformed representation, index, integer,
// string or size update) are errHPACK: a COMPRESSION_ERROR for the
// connection, after which the table is not to be trusted.
func (d *hpackDecoder) decode(b []byte, emit func(name, value string)) error {
	// As x/net's decoder: a size update after the block's first
	// representation is refused unless the table is empty.
	first := true
	for ; len(b) > 0; first = false {
		c := b[0]
		switch {
		case c&0x80 != 0: // indexed field (6.1)
			i, rest, ok := hpackInt(b, 7)
			if !ok {
				return errHPACK
			}
			e, ok := d.at(i)
			if !ok {
				return errHPACK
			}
			b = rest
			emit(e.name, e.value)
		case c&0xe0 == 0x20: // dynamic table size update (6.3)
			n, rest, ok := hpackInt(b, 5)
			if !ok || !first && d.size > 0 || n > uint64(d.limit) {
				return errHPACK
			}
			b = rest
			d.max = int(n)
			d.evict(0)
		default: // literals (6.2): with incremental indexing, without, never indexed
			prefix, index := uint(4), false
			if c&0xc0 == 0x40 {
				prefix, index = 6, true
			}
			i, rest, ok := hpackInt(b, prefix)
			if !ok {
				return errHPACK
			}
			b = rest
			var name, value string
			if i == 0 {
				if name, b, ok = d.str(b); !ok {
					return errHPACK
				}
			} else {
				e, ok := d.at(i)
				if !ok {
					return errHPACK
				}
				name = e.name
			}
			if value, b, ok = d.str(b); !ok {
				return errHPACK
			}
			if index {
				d.add(name, value)
			}
			emit(name, value)
		}
	}
	return nil
}

// at returns the field at index i of the static then dynamic table.
func (d *hpackDecoder) at(i uint64) (hpackEntry, bool) {
	switch {
	case i == 0:
		return hpackEntry{}, false
	case i <= uint64(len(hpackStatic)):
		return hpackStatic[i-1], true
	case i-uint64(len(hpackStatic)) <= uint64(len(d.dyn)):
		return d.dyn[len(d.dyn)-int(i-uint64(len(hpackStatic)))], true
	}
	return hpackEntry{}, false
}

// add inserts a field into the dynamic table, evicting the oldest to
// make room; a field larger than the table empties it (RFC 7541 section
// 4.4).
func (d *hpackDecoder) add(name, value string) {
	n := len(name) + len(value) + 32
	if n > d.max {
		d.dyn, d.size = d.dyn[:0], 0
		return
	}
	d.evict(n)
	d.dyn = append(d.dyn, hpackEntry{name, value})
	d.size += n
}

// evict drops the oldest entries until room more bytes fit under max.
func (d *hpackDecoder) evict(room int) {
	k := 0
	for d.size+room > d.max && k < len(d.dyn) {
		d.size -= len(d.dyn[k].name) + len(d.dyn[k].value) + 32
		k++
	}
	// Drop them from the front without moving the rest: append
	// reallocates once the front's room is used up (amortized, and the
	// dropped strings go with the old array).
	clear(d.dyn[:k])
	d.dyn = d.dyn[k:]
}

// str decodes a string literal (RFC 7541 section 5.2) at the start of b
// and returns it and what follows.
func (d *hpackDecoder) str(b []byte) (string, []byte, bool) {
	if len(b) == 0 {
		return "", nil, false
	}
	huffman := b[0]&0x80 != 0
	n, rest, ok := hpackInt(b, 7)
	if !ok || n > uint64(len(rest)) || n > hpackMaxString {
		return "", nil, false
	}
	raw, rest := rest[:n], rest[n:]
	cache := d.plain
	if huffman {
		cache = d.huff
	}
	if s, ok := cache[string(raw)]; ok {
		return s, rest, true
	}
	s := string(raw)
	if huffman {
		var err error
		if s, err = hpack.HuffmanDecodeToString(raw); err != nil || len(s) > hpackMaxString {
			return "", nil, false
		}
	}
	if len(cache) >= hpackCacheEntries {
		clear(cache)
	}
	cache[string(raw)] = s
	return s, rest, true
}

// hpackStatic is the static table (RFC 7541 Appendix A), index 1 first.
var hpackStatic = [...]hpackEntry{
	{":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"},
	{":path", "/index.html"}, {":scheme", "http"}, {":scheme", "https"}, {":status", "200"},
	{":status", "204"}, {":status", "206"}, {":status", "304"}, {":status", "400"},
	{":status", "404"}, {":status", "500"}, {"accept-charset", ""}, {"accept-encoding", "gzip, deflate"},
	{"accept-language", ""}, {"accept-ranges", ""}, {"accept", ""}, {"access-control-allow-origin", ""},
	{"age", ""}, {"allow", ""}, {"authorization", ""}, {"cache-control", ""},
	{"content-disposition", ""}, {"content-encoding", ""}, {"content-language", ""}, {"content-length", ""},
	{"content-location", ""}, {"content-range", ""}, {"content-type", ""}, {"cookie", ""},
	{"date", ""}, {"etag", ""}, {"expect", ""}, {"expires", ""},
	{"from", ""}, {"host", ""}, {"if-match", ""}, {"if-modified-since", ""},
	{"if-none-match", ""}, {"if-range", ""}, {"if-unmodified-since", ""}, {"last-modified", ""},
	{"link", ""}, {"location", ""}, {"max-forwards", ""}, {"proxy-authenticate", ""},
	{"proxy-authorization", ""}, {"range", ""}, {"referer", ""}, {"refresh", ""},
	{"retry-after", ""}, {"server", ""}, {"set-cookie", ""}, {"strict-transport-security", ""},
	{"transfer-encoding", ""}, {"user-agent", ""}, {"vary", ""}, {"via", ""},
	{"www-authenticate", ""},
}

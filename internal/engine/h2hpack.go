package engine

import (
	"bytes"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"

	"github.com/phalanxload/phalanx/internal/plan"
)

// HPACK (RFC 7541) for request header blocks, as h2load and browsers use
// it: each session has its own encoder (golang.org/x/net/http2/hpack) with
// the dynamic table, so a header repeated on a connection is sent as one
// index once it has been sent as a literal with incremental indexing; the
// values of sensitive fields (authorization, proxy-authorization, cookie)
// stay never-indexed literals (RFC 7541 section 7.1.3). A block that
// changes no table state (only indexed fields and literals that are not
// indexed) is cached per mix entry and written again as it is while the
// table has not changed since, so the steady state costs no encoding.

// h2Block is a session's cached header block for one mix entry.
type h2Block struct {
	b   []byte
	gen uint64 // the session's table generation it was encoded at
}

// h2Encoder is a session's HPACK state. Guarded by the session's wmu:
// blocks are encoded in the order their HEADERS are written.
type h2Encoder struct {
	enc    *hpack.Encoder
	buf    bytes.Buffer
	blocks []h2Block // by entry index
	// gen counts the blocks that changed the dynamic table (insertions,
	// size updates) and the peer's table size changes: a cached block is
	// valid only at the generation it was encoded at.
	gen uint64
}

func newH2Encoder(entries int) *h2Encoder {
	h := &h2Encoder{blocks: make([]h2Block, entries)}
	h.enc = hpack.NewEncoder(&h.buf)
	return h
}

// block returns entry en's header block for the next HEADERS, valid until
// the next call.
func (h *h2Encoder) block(en *entry) []byte {
	if en.isHop { // a redirect hop's fields: encoded each time, never cached
		h.buf.Reset()
		for _, f := range en.h2 {
			_ = h.enc.WriteField(f)
		}
		if b := h.buf.Bytes(); !hpackChangesTable(b) {
			return b
		}
		h.gen++
		return h.buf.Bytes()
	}
	if b := h.cached(en); b != nil {
		return b
	}
	c := &h.blocks[en.idx]
	h.buf.Reset()
	for _, f := range en.h2 {
		_ = h.enc.WriteField(f) // writes to a bytes.Buffer: no error
	}
	b := h.buf.Bytes()
	if hpackChangesTable(b) {
		h.gen++
		c.b = c.b[:0]
		return b
	}
	c.b, c.gen = append(c.b[:0], b...), h.gen
	return c.b
}

// cached returns entry en's cached header block while it is valid (the
// table has not changed since it was encoded), else nil: what block would
// return without encoding.
func (h *h2Encoder) cached(en *entry) []byte {
	if en.isHop {
		return nil
	}
	if c := &h.blocks[en.idx]; c.b != nil && c.gen == h.gen {
		return c.b
	}
	return nil
}

// setTableSize applies the peer's SETTINGS_HEADER_TABLE_SIZE (capped at
// the encoder's 4,096-byte limit); the next block starts with the size
// update (RFC 7541 section 6.3).
func (h *h2Encoder) setTableSize(v uint32) {
	h.enc.SetMaxDynamicTableSize(v)
	h.gen++
}

// hpackChangesTable reports whether header block b changes the decoder's
// dynamic table: it holds a literal with incremental indexing (RFC 7541
// section 6.2.1) or a dynamic table size update (section 6.3). A block it
// cannot parse counts as a change.
func hpackChangesTable(b []byte) bool {
	for len(b) > 0 {
		c := b[0]
		var ok bool
		switch {
		case c&0x80 != 0: // indexed field (section 6.1)
			_, b, ok = hpackInt(b, 7)
		case c&0xc0 == 0x40, c&0xe0 == 0x20:
			return true
		default: // literal without indexing or never indexed (sections 6.2.2, 6.2.3)
			var name uint64
			if name, b, ok = hpackInt(b, 4); ok && name == 0 {
				b, ok = hpackString(b)
			}
			if ok {
				b, ok = hpackString(b)
			}
		}
		if !ok {
			return true
		}
	}
	return false
}

// hpackInt decodes an integer with an n-bit prefix (RFC 7541 section
// 5.1) and returns it with the rest of b.
func hpackInt(b []byte, n uint) (uint64, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	max := uint64(1)<<n - 1
	v := uint64(b[0]) & max
	b = b[1:]
	if v < max {
		return v, b, true
	}
	for shift := uint(0); len(b) > 0 && shift < 63; shift += 7 {
		v += uint64(b[0]&0x7f) << shift
		c := b[0]
		b = b[1:]
		if c&0x80 == 0 {
			return v, b, true
		}
	}
	return 0, nil, false
}

// hpackString skips a string literal (RFC 7541 section 5.2).
func hpackString(b []byte) ([]byte, bool) {
	n, b, ok := hpackInt(b, 7)
	if !ok || n > uint64(len(b)) {
		return nil, false
	}
	return b[n:], true
}

// sensitiveHeader reports whether a field's value is sent never indexed:
// credentials (RFC 7541 section 7.1.3; nghttp2 and browsers do the same).
func sensitiveHeader(name string) bool {
	switch name {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	return false
}

// buildH2Fields returns a request's header fields, in order: the pseudo
// headers (RFC 9113 section 8.3.1), the plan's headers lowercased without
// connection-specific ones (section 8.2.2), a User-Agent unless the plan
// sets one, and Content-Length from the body.
func buildH2Fields(t plan.Target, r plan.Request) []hpack.HeaderField {
	authority := t.HostHeader
	for _, h := range r.Headers {
		if equalFold(h.Name, "host") {
			authority = h.Value
		}
	}
	var fs []hpack.HeaderField
	field := func(name, value string) {
		fs = append(fs, hpack.HeaderField{Name: name, Value: value, Sensitive: sensitiveHeader(name)})
	}
	field(":method", r.Method)
	scheme := "https"
	if !t.TLS {
		scheme = "http" // h2c with prior knowledge (RFC 9113 section 3.3)
	}
	field(":scheme", scheme)
	field(":authority", authority)
	field(":path", t.RequestURI)
	hasUA := false
	for _, h := range r.Headers {
		name := strings.ToLower(h.Name)
		switch name {
		case "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length":
			continue // connection-specific or set below (RFC 9113 8.2.2)
		case "user-agent":
			hasUA = true
		}
		field(name, h.Value)
	}
	if !hasUA {
		field("user-agent", "phalanx/"+Version)
	}
	if len(r.Body) > 0 || r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		field("content-length", strconv.Itoa(len(r.Body)))
	}
	return fs
}

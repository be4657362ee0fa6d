package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// xnetFields decodes one block with x/net's decoder (the reference: what
// the session used before hpackDecoder).
func xnetFields(d *hpack.Decoder, out *[]hpack.HeaderField, block []byte) error {
	if _, err := d.Write(block); err != nil {
		return err
	}
	return d.Close()
}

func ourFields(d *hpackDecoder, block []byte) ([]hpack.HeaderField, error) {
	var fs []hpack.HeaderField
	err := d.decode(block, func(name, value string) { fs = append(fs, hpack.HeaderField{Name: name, Value: value}) })
	return fs, err
}

// TestHPACKDecoderMatchesXNet: response header blocks as x/net's encoder
// writes them (the dynamic table filling and evicting, Huffman coding
// where shorter, table size updates between blocks, never-indexed
// fields, values repeated and changing as a server's Date does) decode
// to exactly the fields x/net's decoder gives, block after block on one
// table.
func TestHPACKDecoderMatchesXNet(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	var ref []hpack.HeaderField
	xd := hpack.NewDecoder(4096, func(f hpack.HeaderField) { ref = append(ref, hpack.HeaderField{Name: f.Name, Value: f.Value}) })
	xd.SetMaxStringLength(hpackMaxString)
	ours := newHPACKDecoder(4096)
	statuses := []string{"200", "204", "301", "404", "503", "200"}
	for block := range 3000 {
		buf.Reset()
		if block%97 == 0 {
			enc.SetMaxDynamicTableSize(uint32(r.IntN(4097))) // a size update starts the next block
		}
		fields := []hpack.HeaderField{
			{Name: ":status", Value: statuses[r.IntN(len(statuses))]},
			{Name: "server", Value: "nginx/1.26"},
			{Name: "date", Value: fmt.Sprintf("Thu, 03 Dec 2026 08:%02d:%02d GMT", block/600, block/10%60)},
			{Name: "content-type", Value: "text/html"},
			{Name: "content-length", Value: fmt.Sprint(600 + r.IntN(3))},
			{Name: "etag", Value: fmt.Sprintf(`"%x-258"`, r.IntN(4))},
		}
		if r.IntN(5) == 0 {
			fields = append(fields, hpack.HeaderField{Name: "set-cookie", Value: fmt.Sprintf("id=%d", r.Int64()), Sensitive: r.IntN(2) == 0})
		}
		if r.IntN(7) == 0 {
			fields = append(fields, hpack.HeaderField{Name: fmt.Sprintf("x-big-%d", r.IntN(3)), Value: string(bytes.Repeat([]byte{'a' + byte(r.IntN(26))}, r.IntN(5000)))})
		}
		for _, f := range fields {
			if err := enc.WriteField(f); err != nil {
				t.Fatal(err)
			}
		}
		ref = ref[:0]
		if err := xnetFields(xd, &ref, buf.Bytes()); err != nil {
			t.Fatalf("block %d: x/net: %v", block, err)
		}
		got, err := ourFields(ours, buf.Bytes())
		if err != nil {
			t.Fatalf("block %d: %v", block, err)
		}
		if !slices.Equal(got, ref) {
			t.Fatalf("block %d: decoded %v, x/net %v", block, got, ref)
		}
	}
	if len(ours.huff) == 0 || len(ours.huff) > hpackCacheEntries || len(ours.plain) > hpackCacheEntries {
		t.Errorf("string caches hold %d Huffman and %d plain strings; want 1 to %d each", len(ours.huff), len(ours.plain), hpackCacheEntries)
	}
}

// FuzzHPACKDecoder: on arbitrary header blocks (the input split into up
// to four blocks decoded in turn on one table), hpackDecoder refuses
// exactly what x/net's decoder refuses and otherwise emits the same
// fields.
func FuzzHPACKDecoder(f *testing.F) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, fs := range [][]hpack.HeaderField{
		{{Name: ":status", Value: "200"}, {Name: "date", Value: "Thu, 03 Dec 2026 08:00:00 GMT"}},
		{{Name: ":status", Value: "404"}, {Name: "x-a", Value: "b"}, {Name: "x-a", Value: "b"}},
	} {
		buf.Reset()
		for _, fl := range fs {
			_ = enc.WriteField(fl)
		}
		f.Add(append([]byte{0}, buf.Bytes()...))
	}
	f.Add([]byte{2, 0x3f, 0xe1, 0x1f, 0x88, 0x20, 0x40, 0x01, 'a', 0x81, 0x1f})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		cuts := int(in[0]%4) + 1
		in = in[1:]
		var ref []hpack.HeaderField
		xd := hpack.NewDecoder(4096, func(f hpack.HeaderField) { ref = append(ref, hpack.HeaderField{Name: f.Name, Value: f.Value}) })
		xd.SetMaxStringLength(hpackMaxString)
		ours := newHPACKDecoder(4096)
		for i := range cuts {
			block := in[len(in)*i/cuts : len(in)*(i+1)/cuts]
			if len(block) == 0 {
				continue // x/net's Write takes an empty block as nothing at all
			}
			ref = ref[:0]
			xerr := xnetFields(xd, &ref, block)
			got, err := ourFields(ours, block)
			if (err == nil) != (xerr == nil) {
				t.Fatalf("block %d %x: error %v, x/net's %v", i, block, err, xerr)
			}
			if err != nil {
				return // the connection ends: no later block
			}
			if !slices.Equal(got, ref) {
				t.Fatalf("block %d %x: decoded %v, x/net %v", i, block, got, ref)
			}
		}
	})
}

// BenchmarkHPACKResponse decodes NGINX-like response header blocks
// (static-table names, Huffman-coded values, a Date that changes each
// second) with hpackDecoder and with x/net's decoder.
func BenchmarkHPACKResponse(b *testing.B) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	enc.SetMaxDynamicTableSize(0) // NGINX indexes nothing: every value is a literal
	var blocks [][]byte
	for i := range 1000 {
		buf.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":status", Value: "200"}, {Name: "server", Value: "nginx/1.26.3"},
			{Name: "date", Value: fmt.Sprintf("Thu, 03 Dec 2026 08:47:%02d GMT", i/100)},
			{Name: "content-type", Value: "text/html"}, {Name: "content-length", Value: "600"},
			{Name: "last-modified", Value: "Wed, 02 Dec 2026 10:00:00 GMT"}, {Name: "etag", Value: `"692eb8a0-258"`},
			{Name: "accept-ranges", Value: "bytes"},
		} {
			_ = enc.WriteField(f)
		}
		blocks = append(blocks, bytes.Clone(buf.Bytes()))
	}
	var n int
	b.Run("phalanx", func(b *testing.B) {
		d := newHPACKDecoder(4096)
		emit := func(name, value string) { n += len(name) + len(value) }
		for i := range b.N {
			if err := d.decode(blocks[i%len(blocks)], emit); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("x-net", func(b *testing.B) {
		d := hpack.NewDecoder(4096, func(f hpack.HeaderField) { n += len(f.Name) + len(f.Value) })
		b.ReportAllocs()
		for i := range b.N {
			if _, err := d.Write(blocks[i%len(blocks)]); err != nil {
				b.Fatal(err)
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

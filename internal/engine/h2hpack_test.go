package engine

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestHPACKChangesTable: blocks from x/net's encoder that insert into the
// dynamic table or update its size are told apart from blocks of indexed
// fields and unindexed literals only, which may be cached.
func TestHPACKChangesTable(t *testing.T) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	encode := func(fs ...hpack.HeaderField) []byte {
		buf.Reset()
		for _, f := range fs {
			_ = enc.WriteField(f)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	ua := hpack.HeaderField{Name: "user-agent", Value: "phalanx/test"}
	long := hpack.HeaderField{Name: "x-long", Value: strings.Repeat("v", 300)} // a length over one prefix byte
	auth := hpack.HeaderField{Name: "authorization", Value: "Bearer " + strings.Repeat("t", 200), Sensitive: true}
	odd := hpack.HeaderField{Name: "x-secret", Value: "s", Sensitive: true} // a literal name, never indexed
	method := hpack.HeaderField{Name: ":method", Value: "GET"}
	for _, tc := range []struct {
		name  string
		block []byte
		want  bool
	}{
		{"first user-agent", encode(method, ua, long), true},
		{"repeated: indexed", encode(method, ua, long), false},
		{"never indexed", encode(method, auth, odd), false},
		{"never indexed again", encode(auth, odd, ua), false},
		{"one new field", encode(ua, hpack.HeaderField{Name: "x-new", Value: "1"}), true},
		{"truncated", encode(auth)[:5], true},
	} {
		if got := hpackChangesTable(tc.block); got != tc.want {
			t.Errorf("%s: hpackChangesTable(% x) = %v, want %v", tc.name, tc.block, got, tc.want)
		}
	}
	enc.SetMaxDynamicTableSize(100)
	if b := encode(method); !hpackChangesTable(b) {
		t.Errorf("a table size update (% x) must count as a change", b)
	}
}

// TestH2HPACKDynamicTable: requests use the dynamic table, as h2load and
// browsers do: the server's decoder (one per connection) reads every
// stream's fields back exactly; authorization and cookie arrive as
// never-indexed literals, and the header bytes fall to under half the
// never-indexed encoding's (the credentials' literals are most of what is
// left). A server whose SETTINGS_HEADER_TABLE_SIZE
// is 0 (enforced once acknowledged) gets a size update and no dynamic
// indexing, and decodes everything too.
func TestH2HPACKDynamicTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table *uint32
	}{{"default table", nil}, {"table size 0", new(uint32)}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newH2FrameServer(t, func(int64, string, string) h2Action { return h2Answer })
			srv.keepFields, srv.headerTable = true, tc.table
			hdrs := []plan.Header{{Name: "Authorization", Value: "Bearer abcdefghijklmnopqrstuvwxyz"}, {Name: "Cookie", Value: "session=0123456789abcdef"},
				{Name: "Accept-Encoding", Value: "gzip, deflate, br"}, {Name: "X-Request-Kind", Value: "load-test"}}
			p := plan.Plan{URL: srv.url + "/", Protocol: plan.H2, MaxStreams: 4, Connections: 2, Requests: 300,
				TLS: plan.TLS{CAPEM: srv.ca}, Headers: hdrs,
				Mix: []plan.Request{{URL: srv.url + "/a"}, {URL: srv.url + "/b?q=1", Method: "POST", Body: []byte("{}")},
					{URL: srv.url + "/c", Headers: []plan.Header{{Name: "X-Only-C", Value: "c"}}}}}
			total, res, _ := runH2(t, p, 2)
			srv.check(t)
			srv.counts(t) // waits for the connections to end
			if total.Status[200] != 300 || total.ErrorTotal() != 0 || res.Issued != 300 {
				t.Fatalf("statuses %v, errors %v, issued %d: want 300 × 200", total.StatusMap(), total.ErrorMap(), res.Issued)
			}
			// What each path's stream must decode to: the fields of its
			// entry (buildH2Fields), sensitive exactly where marked.
			p.SetDefaults()
			parsed, err := p.Check()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]hpack.HeaderField{}
			var plain int // the never-indexed encoding's bytes, per cycle of the mix
			for i, r := range p.Entries() {
				fs := buildH2Fields(parsed.Entries[i], r)
				want[parsed.Entries[i].RequestURI] = fs
				var b bytes.Buffer
				enc := hpack.NewEncoder(&b)
				enc.SetMaxDynamicTableSizeLimit(0)
				for _, f := range fs {
					f.Sensitive = true
					_ = enc.WriteField(f)
				}
				plain += b.Len()
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for i, got := range srv.fields {
				var path string
				for _, f := range got {
					if f.Name == ":path" {
						path = f.Value
					}
				}
				if !slices.Equal(got, want[path]) {
					t.Fatalf("stream %d decoded %v, want %v", i, got, want[path])
				}
			}
			perReq := float64(srv.headerBytes.Load()) / 300
			t.Logf("%.1f header bytes per request, %.1f never indexed", perReq, float64(plain)/3)
			if tc.table == nil && perReq > float64(plain)/3/2 {
				t.Errorf("%.1f header bytes per request, want under half the never-indexed %.1f", perReq, float64(plain)/3)
			}
			if tc.table != nil && perReq < float64(plain)/3*3/4 {
				t.Errorf("%.1f header bytes per request with a table of 0: the dynamic table was used (never-indexed: %.1f)", perReq, float64(plain)/3)
			}
		})
	}
}

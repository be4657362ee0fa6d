package hist

import "testing"

func TestSetKindsNamedAndMerged(t *testing.T) {
	a, b := NewSet(), NewSet()
	seen := map[*Histogram]bool{}
	for k := range NumKinds {
		if a.Get(k) == nil || seen[a.Get(k)] {
			t.Fatalf("kind %s: nil or shared histogram", k)
		}
		seen[a.Get(k)] = true
		for range int(k) + 1 {
			a.Get(k).RecordMicros(int64(10 * (k + 1)))
		}
		b.Get(k).RecordMicros(5)
	}
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	for k := range NumKinds {
		if got := a.Get(k).Count(); got != int64(k)+2 {
			t.Errorf("%s: count %d, want %d", k, got, int64(k)+2)
		}
	}
	want := []string{"latency", "service", "connect", "tls_full", "tls_resumed", "ttfb", "lateness", "ok", "handshake_latency"}
	for k := range NumKinds {
		if k.String() != want[k] {
			t.Errorf("kind %d named %q, want %q", k, k, want[k])
		}
	}
	if a.Get(NumKinds) != nil || NumKinds.String() != "unknown" {
		t.Error("kind outside the set resolved")
	}
	h := New()
	a.Put(TTFB, h)
	if a.TTFB != h {
		t.Error("Put did not replace TTFB")
	}
	a.Reset()
	if a.Latency.Count() != 0 {
		t.Error("Reset left samples")
	}
}

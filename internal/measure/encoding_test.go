package measure

import (
	"reflect"
	"testing"
)

func TestEncodingOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Encoding
	}{
		{"", EncIdentity}, {"identity", EncIdentity}, {"gzip", EncGzip}, {"GZip", EncGzip}, {"x-gzip", EncGzip},
		{"br", EncBrotli}, {" br ", EncBrotli}, {"gzip, br", EncBrotli}, {"br,gzip", EncGzip}, {"deflate", EncDeflate},
		{"zstd", EncZstd}, {"compress", EncCompress}, {"x-compress", EncCompress}, {"aes128gcm", EncOther}, {"gzip,", EncGzip},
		{"brr", EncOther},
	} {
		if got := EncodingOf([]byte(tc.in)); got != tc.want {
			t.Errorf("EncodingOf(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestEncodingNamesRoundTrip(t *testing.T) {
	for e := Encoding(0); e < NumEncodings; e++ {
		got, err := ParseEncoding(e.String())
		if err != nil || got != e {
			t.Errorf("ParseEncoding(%q) = %v, %v", e.String(), got, err)
		}
	}
	if _, err := ParseEncoding("unknown"); err == nil {
		t.Error("ParseEncoding(unknown) succeeded")
	}
}

func TestEncodingOfAllocatesNothing(t *testing.T) {
	v := []byte("gzip, br")
	if n := testing.AllocsPerRun(100, func() { _ = EncodingOf(v) }); n != 0 {
		t.Errorf("EncodingOf allocates %v times per call", n)
	}
}

func TestAddSplitsAndEncodings(t *testing.T) {
	var a, b, sum Counts
	a.HeaderBytes, a.BodyBytes, a.Encodings[EncBrotli] = 10, 100, 2
	b.HeaderBytes, b.BodyBytes, b.Encodings[EncBrotli], b.Encodings[EncIdentity] = 5, 50, 1, 4
	sum.Add(&a)
	sum.Add(&b)
	if sum.HeaderBytes != 15 || sum.BodyBytes != 150 {
		t.Errorf("header, body bytes %d, %d, want 15, 150", sum.HeaderBytes, sum.BodyBytes)
	}
	if got, want := sum.EncodingMap(), map[string]int64{"br": 3, "identity": 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("encodings %v, want %v", got, want)
	}
}

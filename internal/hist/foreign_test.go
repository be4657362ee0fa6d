package hist

import hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

// newForeign encodes a histogram with 2 significant figures.
func newForeign() []byte {
	h := hdrhistogram.New(1, HighestUs, 2)
	_ = h.RecordValue(10)
	b, _ := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	return b
}

package main

import (
	"strings"
	"testing"
)

// TestABSideOrder: coordctl ab's runs go A B B A A B ..., each side
// --repeats times, and with an even --repeats the two sides' mean position
// in the sequence is the same (a steady drift adds as much to each).
func TestABSideOrder(t *testing.T) {
	var got strings.Builder
	for i := range 10 {
		got.WriteByte("AB"[abSide(i)])
	}
	if got.String() != "ABBAABBAAB" {
		t.Errorf("order of 5 repeats %s, want ABBAABBAAB", got.String())
	}
	for _, repeats := range []int{2, 4, 6, 10} {
		var n, sum [2]int
		for i := range 2 * repeats {
			n[abSide(i)]++
			sum[abSide(i)] += i
		}
		if n[0] != repeats || n[1] != repeats || sum[0] != sum[1] {
			t.Errorf("--repeats %d: %d A and %d B runs at positions summing to %d and %d, want %d each and equal sums", repeats, n[0], n[1], sum[0], sum[1], repeats)
		}
	}
}

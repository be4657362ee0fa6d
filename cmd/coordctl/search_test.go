package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestSearchFlagErrors: a bad search command line is a usage error naming
// the flag, before any coordinator is dialled.
func TestSearchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"https://127.0.0.1:1/"}, "no --slo"},
		{[]string{"--slo", "p99<<3ms", "https://127.0.0.1:1/"}, "--slo"},
		{[]string{"--slo", "p99<3ms", "--rate-range", "5000", "https://127.0.0.1:1/"}, "--rate-range \"5000\": want FROM..TO"},
		{[]string{"--slo", "p99<3ms", "--rate-range", "5000..100", "https://127.0.0.1:1/"}, "TO \"100\": want a number at least FROM"},
		{[]string{"--slo", "p99<3ms", "--connections-range", "0..10", "https://127.0.0.1:1/"}, "--connections-range \"0..10\": FROM \"0\""},
		{[]string{"--slo", "p99<3ms", "--rate-range", "1..2", "--connections-range", "1..2", "https://127.0.0.1:1/"}, "give one"},
		{[]string{"--slo", "p99<3ms", "--precision", "0%", "https://127.0.0.1:1/"}, "--precision \"0%\""},
		{[]string{"--slo", "stage1.p99<3ms", "https://127.0.0.1:1/"}, "no stages"},
	} {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs(append([]string{"--coordinator", "127.0.0.1:1", "search"}, c.args...))
		err := root.Execute()
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("search %q: error %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

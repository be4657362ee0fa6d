package coordinator

import "testing"

// TestKeyringRefusal: a refused keyring operation states what it found on
// the members that answered ("it is the primary key of") apart from those
// it could not check, and leaves out a part with no members.
func TestKeyringRefusal(t *testing.T) {
	const is, unsure = "it is the primary key of", "could not check whether it is the primary key of"
	for _, c := range []struct {
		matched, unchecked []string
		want               string
	}{
		{[]string{"a1", "coordinator"}, nil, "it is the primary key of a1, coordinator"},
		{nil, []string{"a2 (connection refused)"}, "could not check whether it is the primary key of a2 (connection refused)"},
		{[]string{"a1"}, []string{"a2 (deadline exceeded)"}, "it is the primary key of a1; could not check whether it is the primary key of a2 (deadline exceeded)"},
	} {
		if got := refusal(is, c.matched, unsure, c.unchecked); got != c.want {
			t.Errorf("refusal(%v, %v) = %q, want %q", c.matched, c.unchecked, got, c.want)
		}
	}
}

package coordinator

import "testing"

func TestJoinAgentMessages(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"agent a1: resolve target.example: no such host", "agent a2: resolve target.example: no such host", "agent a3: resolve target.example: no such host"},
			"3 agents (a1, a2, a3): resolve target.example: no such host"},
		{[]string{"agent a1: x", "agent a2: y", "agent a3: x"}, "2 agents (a1, a3): x; agent a2: y"},
		{[]string{"agent a1 refuses the share: target t is outside the allowlist", "agent a2 refuses the share: target t is outside the allowlist"},
			"2 agents (a1, a2) refuse the share: target t is outside the allowlist"},
		{[]string{"agent a1: x"}, "agent a1: x"},
		{[]string{"no agents", "no agents"}, "no agents; no agents"},
		{[]string{"agent a1 is gone", "agent a2 is gone"}, "agent a1 is gone; agent a2 is gone"},
		{[]string{"agent a: x", "agent b: x", "agent c: x", "agent d: x", "agent e: x", "agent f: x", "agent g: x"}, "7 agents (a, b, c, d, e and 2 more): x"},
	} {
		if got := joinAgentMessages(tc.in); got != tc.want {
			t.Errorf("joinAgentMessages(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

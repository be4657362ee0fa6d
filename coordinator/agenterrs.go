package coordinator

import (
	"fmt"
	"strings"
)

// joinAgentMessages joins the messages of several agents' errors, one group
// per distinct cause, in first-seen order: messages that differ only in the
// agent they name ("agent a1: resolve target.example: no such host", the
// same from a2 and a3) become one, counting and naming the agents: "3
// agents (a1, a2, a3): resolve target.example: no such host". A message
// that names no agent first ("agent NAME: ..." or "agent NAME refuses
// ...") stays as it is. Groups are joined with "; ".
func joinAgentMessages(msgs []string) string {
	type group struct {
		rest  string // the message after the agent's name: ": cause" or " refuses ..."
		names []string
		whole string // the message itself, for a group of one
	}
	var groups []*group
	byRest := map[string]*group{}
	for _, m := range msgs {
		name, rest, ok := agentPrefix(m)
		if !ok {
			groups = append(groups, &group{whole: m})
			continue
		}
		if g := byRest[rest]; g != nil {
			g.names = append(g.names, name)
			continue
		}
		g := &group{rest: rest, names: []string{name}, whole: m}
		byRest[rest] = g
		groups = append(groups, g)
	}
	out := make([]string, len(groups))
	for i, g := range groups {
		if len(g.names) < 2 {
			out[i] = g.whole
			continue
		}
		rest := g.rest
		if r, ok := strings.CutPrefix(rest, " refuses "); ok {
			rest = " refuse " + r
		}
		out[i] = fmt.Sprintf("%d agents (%s)%s", len(g.names), listNames(g.names, 5), rest)
	}
	return strings.Join(out, "; ")
}

// agentPrefix splits "agent NAME: cause" into NAME and ": cause", and
// "agent NAME refuses ..." into NAME and " refuses ...".
func agentPrefix(m string) (name, rest string, ok bool) {
	after, ok := strings.CutPrefix(m, "agent ")
	if !ok {
		return "", "", false
	}
	i := strings.IndexAny(after, ": ")
	if i <= 0 || (after[i] == ' ' && !strings.HasPrefix(after[i:], " refuses ")) {
		return "", "", false
	}
	return after[:i], after[i:], true
}

// listNames lists names, the first max of them and then how many more.
func listNames(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

package report

import "strconv"

// Plural writes n and word, adding an s unless n is 1: "1 agent",
// "2 agents", "0 errors" (regular English plurals only; see pluralOf for
// the irregular ones the reports use).
func Plural(n int64, word string) string { return plural(n, word) }

// pluralOf writes n and the singular or the plural given: "1 retry",
// "3 retries".
func pluralOf(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

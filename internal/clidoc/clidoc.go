package clidoc

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Section returns the text of the Markdown section under the heading line
// heading ("### coordctl"), up to the next heading of the same or a higher
// level, or "" when there is none.
func Section(markdown, heading string) string {
	level := strings.IndexByte(heading, ' ')
	var out []string
	in := false
	for _, line := range strings.Split(markdown, "\n") {
		if in && strings.HasPrefix(line, "#") {
			if l := strings.IndexByte(line, ' '); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				break
			}
		}
		if line == heading {
			in = true
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Rows returns the rows of every Markdown table in text, each as its cells
// trimmed of spaces; header and delimiter rows are left out. A `\|` inside a
// cell is a literal bar (GitHub Flavored Markdown), not a cell border.
func Rows(text string) [][]string {
	var rows [][]string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || isDelimiter(line) {
			continue
		}
		if i+1 < len(lines) && isDelimiter(strings.TrimSpace(lines[i+1])) {
			continue // a header row
		}
		line = strings.ReplaceAll(line, `\|`, "\x00")
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j, c := range cells {
			cells[j] = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
		}
		rows = append(rows, cells)
	}
	return rows
}

func isDelimiter(line string) bool {
	return strings.HasPrefix(line, "|") && strings.Trim(line, "|-: ") == ""
}

// Mentions reports whether text names the flag --name, and not only a
// longer flag that starts with it (--tls-min does not mention --tls).
func Mentions(text, name string) bool {
	return regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `([^-a-z0-9]|$)`).MatchString(text)
}

// Flags returns the names of cmd's own flags (not those inherited from its
// parents), sorted, leaving out hidden ones and cobra's --help and
// --version.
func Flags(cmd *cobra.Command) []string {
	var names []string
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" && f.Name != "version" {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	return names
}

// Undocumented returns the flags of cmd (Flags) that no row of the tables
// in text documents in column col: the row's first cell names the flag and
// its cell col is not empty ("### agent and coordinator" has one column
// per daemon).
func Undocumented(text string, cmd *cobra.Command, col int) []string {
	var missing []string
	for _, name := range Flags(cmd) {
		found := false
		for _, r := range Rows(text) {
			if col < len(r) && r[col] != "" && Mentions(r[0], name) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, name)
		}
	}
	return missing
}

// ReadSection reads the Markdown file name and returns its section under
// heading (Section); a missing file or section is an error.
func ReadSection(name, heading string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	s := Section(string(b), heading)
	if s == "" {
		return "", fmt.Errorf("%s: no section %q", name, heading)
	}
	return s, nil
}

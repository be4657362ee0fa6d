package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/clidoc"
)

// TestREADMEHasEveryFlag: every flag of every coordctl command is in the
// README, in the row of its command in "### coordctl" (run's in the run
// flag table, whose rows start with the flag), and the global flags in
// that section's text, so that the README stays true as flags are added.
func TestREADMEHasEveryFlag(t *testing.T) {
	section, err := clidoc.ReadSection("../../README.md", "### coordctl")
	if err != nil {
		t.Fatal(err)
	}
	rows := clidoc.Rows(section)
	root := newRoot(io.Discard, io.Discard)
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !clidoc.Mentions(section, f.Name) {
			t.Errorf("README, ### coordctl: no global flag --%s", f.Name)
		}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c == root || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		path := c.CommandPath()
		var cells []string
		for _, r := range rows {
			first := r[0]
			if c.Name() == "run" && strings.HasPrefix(first, "`-") ||
				strings.HasPrefix(first, "`"+path+" ") || first == "`"+path+"`" ||
				strings.HasPrefix(first, "`coordctl keyring ") && strings.HasPrefix(path, "coordctl keyring ") {
				cells = append(cells, first)
			}
		}
		if len(cells) == 0 {
			t.Errorf("README, ### coordctl: no row for %s", path)
			return
		}
		text := strings.Join(cells, "\n")
		for _, name := range clidoc.Flags(c) {
			if !clidoc.Mentions(text, name) {
				t.Errorf("README, ### coordctl: %s --%s is not in its row", path, name)
			}
		}
	}
	walk(root)
}

// TestREADMECompareOneMachine: the README tells a one-machine user (whose
// runs are client-bound, so compare refuses a side left empty) to give
// --include-client-bound, and every `coordctl compare` command line in it
// parses with compare's own flags, so the flag is spelled as the command
// takes it.
func TestREADMECompareOneMachine(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, want := range []string{"coordctl compare --include-client-bound tag:ab:ID:a tag:ab:ID:b", "`coordctl compare --include-client-bound RUN_A RUN_B`"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README: no one-machine compare %q", want)
		}
	}
	root := newRoot(io.Discard, io.Discard)
	cmp, _, err := root.Find([]string{"compare"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(readme, "\n") {
		line = strings.Trim(strings.TrimSpace(line), "`")
		if !strings.HasPrefix(line, "coordctl compare --") {
			continue
		}
		n++
		if err := cmp.ParseFlags(strings.Fields(strings.TrimPrefix(line, "coordctl compare "))); err != nil {
			t.Errorf("README %q: %v", line, err)
		}
	}
	if n == 0 {
		t.Errorf("README: no coordctl compare line with a flag")
	}
}

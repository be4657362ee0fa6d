package clidoc

import (
	"reflect"
	"testing"

	"github.com/spf13/cobra"
)

const doc = "# T\n\n## A\n\n| flag | what |\n|---|---|\n| `--a N` | one \\| two |\n| `-b, --bee` | |\n\n### A.1\n\ntext --sub\n\n## B\n\n| `--c` | x |\n"

func TestSectionAndRows(t *testing.T) {
	a := Section(doc, "## A")
	if got, want := Rows(a), [][]string{{"`--a N`", "one | two"}, {"`-b, --bee`", ""}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Rows(Section(## A)) = %q, want %q", got, want)
	}
	if !Mentions(a, "sub") {
		t.Errorf("Section(## A) lacks its subsection:\n%s", a)
	}
	if Mentions(a, "c") {
		t.Errorf("Section(## A) runs into ## B:\n%s", a)
	}
	if Section(doc, "## Z") != "" {
		t.Error("Section of a missing heading is not empty")
	}
}

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		text, name string
		want       bool
	}{
		{"`--tls-min`, `--tls-max`", "tls-max", true},
		{"`--tls-min`", "tls", false},
		{"[--hosts NAMES]", "hosts", true},
		{"--hosts", "host", false},
		{"end --json", "json", true},
	} {
		if got := Mentions(tc.text, tc.name); got != tc.want {
			t.Errorf("Mentions(%q, %q) = %v, want %v", tc.text, tc.name, got, tc.want)
		}
	}
}

func TestFlags(t *testing.T) {
	root := &cobra.Command{Use: "r"}
	root.PersistentFlags().String("global", "", "")
	sub := &cobra.Command{Use: "s", Run: func(*cobra.Command, []string) {}}
	sub.Flags().Int("b", 0, "")
	sub.Flags().Int("a", 0, "")
	sub.Flags().Bool("secret", false, "")
	_ = sub.Flags().MarkHidden("secret")
	root.AddCommand(sub)
	root.InitDefaultHelpFlag()
	sub.InitDefaultHelpFlag()
	if got, want := Flags(sub), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Flags(sub) = %q, want %q", got, want)
	}
}

func TestUndocumented(t *testing.T) {
	cmd := &cobra.Command{Use: "d", Run: func(*cobra.Command, []string) {}}
	for _, n := range []string{"a", "bee", "c", "d"} {
		cmd.Flags().Bool(n, false, "")
	}
	text := "| flag | one | two |\n|---|---|---|\n| `--a` | yes | |\n| `--bee` | | yes |\n| `--c` | yes | same |\n"
	if got, want := Undocumented(text, cmd, 1), []string{"bee", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Undocumented(column 1) = %q, want %q", got, want)
	}
	if got, want := Undocumented(text, cmd, 2), []string{"a", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Undocumented(column 2) = %q, want %q", got, want)
	}
}

package main

import (
	"testing"

	"github.com/phalanxload/phalanx/internal/clidoc"
)

// TestREADMEHasEveryFlag: every flag of the coordinator is in the README's
// "### agent and coordinator" table, with words in the coordinator's column.
func TestREADMEHasEveryFlag(t *testing.T) {
	section, err := clidoc.ReadSection("../../README.md", "### agent and coordinator")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range clidoc.Undocumented(section, newCommand(), 2) {
		t.Errorf("README, ### agent and coordinator: no coordinator --%s", name)
	}
}

// Package clidoc reads the README's flag tables, so that each command's
// tests can check that every flag the command has is documented there
// (README: "### coordctl", "### agent and coordinator"). It owns only the
// reading of Markdown tables and flag names; the commands own their flags
// and the README its words.
package clidoc

package main

import (
	"errors"
	"fmt"

	"github.com/phalanxload/phalanx/internal/report"
)

// openHTMLOutput opens the file of --html (see openOutput); the page is
// never written to stdout, where the text report goes.
func openHTMLOutput(name string) (*output, error) {
	if name == "-" {
		return nil, &usageError{errors.New("--html: give a file name (the page is not written to stdout; --json - writes JSON there)")}
	}
	return openOutput("--html", name)
}

// writeHTML replaces the file's content with the run's HTML report
// (report.WriteHTML) and closes it; it does nothing without --html.
func (o *output) writeHTML(run *report.Run, rep *report.Report) error {
	if o.name == "" {
		return nil
	}
	fh := o.fh
	o.fh = nil
	err := fh.Truncate(0)
	if err == nil {
		err = report.WriteHTML(fh, run, rep, report.HTMLOptions{})
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	return nil
}

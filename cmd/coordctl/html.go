package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/phalanxload/phalanx/internal/compare"
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

// writeSearchHTML replaces the file's content with the search's HTML page
// (report.WriteSearchHTML) and closes it; it does nothing without --html.
func (o *output) writeSearchHTML(s *report.Search) error {
	return o.writePage(func(w io.Writer) error { return report.WriteSearchHTML(w, s, report.HTMLOptions{}) })
}

// writeCompareHTML replaces the file's content with the comparison's HTML
// page (compare.HTML, report.WriteCompareHTML) and closes it; it does
// nothing without --html.
func (o *output) writeCompareHTML(res *compare.Result, a, b []compare.Run) error {
	if o.name == "" {
		return nil
	}
	c, err := compare.HTML(res, a, b)
	if err != nil {
		o.discard()
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	return o.writePage(func(w io.Writer) error { return report.WriteCompareHTML(w, c, report.HTMLOptions{}) })
}

// writeHTML replaces the file's content with the run's HTML report
// (report.WriteHTML) and closes it; it does nothing without --html.
func (o *output) writeHTML(run *report.Run, rep *report.Report) error {
	return o.writePage(func(w io.Writer) error { return report.WriteHTML(w, run, rep, report.HTMLOptions{}) })
}

// writePage replaces the file's content with what write writes and closes
// it; it does nothing without the flag.
func (o *output) writePage(write func(io.Writer) error) error {
	if o.name == "" {
		return nil
	}
	fh := o.fh
	o.fh = nil
	err := fh.Truncate(0)
	if err == nil {
		err = write(fh)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	return nil
}

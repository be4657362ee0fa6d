package main

import (
	"fmt"
	"io"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// summaryFormat is coordctl run's --format: the layout of the summary on
// stdout. "text" is wrk's (report.WriteText), its "Running ... @ URL"
// header printed when the run starts, before the live progress, as wrk
// prints it; "h2load" is h2load's summary (report.WriteH2load), printed at
// the end.
type summaryFormat string

const (
	formatText   summaryFormat = "text"
	formatH2load summaryFormat = "h2load"
)

func (f *summaryFormat) String() string { return string(*f) }
func (f *summaryFormat) Type() string   { return "format" }
func (f *summaryFormat) Set(s string) error {
	switch summaryFormat(s) {
	case formatText, formatH2load:
		*f = summaryFormat(s)
		return nil
	}
	return fmt.Errorf("want text (wrk's layout) or h2load")
}

// summary prints a run's summary on stdout in one format: the text
// header once the run's first interval arrived, then the report at its end
// (with the header, if none was printed).
type summary struct {
	w       io.Writer
	format  summaryFormat
	latency bool
	p       plan.Plan
	// header is set once the text header has been printed.
	header bool
}

// accepted prints the text header of a run of agents agents: target,
// planned window or count, agents and connections. The target is the
// stored report's, with its secrets redacted (plan.Redacted).
func (s *summary) accepted(agents int) {
	if s.format != formatText || s.header || agents <= 0 {
		return
	}
	h := report.Header{Target: plan.Redacted(s.p).URL, Duration: s.p.Duration, Requests: s.p.Requests,
		Agents: agents, Connections: int64(s.p.Connections)}
	if s.p.ConnectionRate {
		h.ConnectionRate, h.MaxOpen = true, int64(s.p.MaxConnections)
		if len(s.p.Stages) == 0 {
			h.CPS = float64(s.p.Rate)
		}
	}
	s.header = report.WriteHeader(s.w, h) == nil
}

// write prints rep in the summary's format (the text without the header
// already printed).
func (s *summary) write(rep *report.Report) error {
	if s.format == formatH2load {
		return rep.WriteH2load(s.w)
	}
	return rep.WriteText(s.w, report.TextOptions{Latency: s.latency, NoHeader: s.header})
}

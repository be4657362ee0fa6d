package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/report"
)

// formatFlags are the HdrHistogram and CSV outputs of a report (coordctl run
// --hgrm, --hlog, --csv, --csv-per-agent).
type formatFlags struct {
	hgrm        string // prefix: PREFIX-latency.hgrm and the others of report.HgrmFiles
	hlog        string
	csv         string
	csvPerAgent bool
}

// register adds the flags to fl.
func (f *formatFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.hgrm, "hgrm", "", "write HdrHistogram percentile distributions (.hgrm, ms) as PREFIX-latency.hgrm, and for open loop PREFIX-service_time.hgrm and PREFIX-lateness.hgrm, and the phases PREFIX-connect, -tls_full, -tls_resumed, -ttfb.hgrm (with --cps also -handshake_latency.hgrm)")
	fl.StringVar(&f.hlog, "hlog", "", "write the latency timeline as an HdrHistogram interval log (format 1.3) to this file: per interval a merged line and one line per agent (Tag=NAME)")
	fl.StringVar(&f.csv, "csv", "", "write the timeline as CSV to this file, one row per interval")
	fl.BoolVar(&f.csvPerAgent, "csv-per-agent", false, "with --csv: also one row per agent per interval (agent column; 'all' is the merged row)")
}

// agentIntervals reports whether the outputs need every agent's intervals
// in the result (RunPlanRequest.agent_intervals).
func (f *formatFlags) agentIntervals() bool { return f.hlog != "" || (f.csv != "" && f.csvPerAgent) }

// formatOutputs are the format files, opened before the run (a bad path
// fails at once, as --json's) and written after it.
type formatOutputs struct {
	f        *formatFlags
	hgrm     *output // PREFIX-latency.hgrm, the one always written
	hlog     *output
	csv      *output
	perAgent bool
}

// open opens the files the flags name. Errors: a usage error naming the
// flag for "-" (these outputs go to files only), --csv-per-agent without
// --csv, or a path that cannot be created.
func (f *formatFlags) open() (*formatOutputs, error) {
	if f.csvPerAgent && f.csv == "" {
		return nil, &usageError{errors.New("--csv-per-agent: needs --csv FILE")}
	}
	o := &formatOutputs{f: f, hgrm: &output{}, hlog: &output{}, csv: &output{}, perAgent: f.csvPerAgent}
	for _, x := range []struct {
		flag, name string
		out        **output
	}{{"--hgrm", hgrmPath(f.hgrm, "latency"), &o.hgrm}, {"--hlog", f.hlog, &o.hlog}, {"--csv", f.csv, &o.csv}} {
		if x.name == "-" || (x.flag == "--hgrm" && f.hgrm == "-") {
			o.discard()
			return nil, &usageError{fmt.Errorf("%s: writes files only, not '-' (stdout)", x.flag)}
		}
		if x.name == "" {
			continue
		}
		out, err := openOutput(x.flag, x.name)
		if err != nil {
			o.discard()
			return nil, err
		}
		*x.out = out
	}
	return o, nil
}

// hgrmPath is the .hgrm file of a histogram: PREFIX-NAME.hgrm ("" without a
// prefix).
func hgrmPath(prefix, name string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "-" + name + ".hgrm"
}

// discard closes and removes the files not written.
func (o *formatOutputs) discard() {
	for _, out := range []*output{o.hgrm, o.hlog, o.csv} {
		out.discard()
	}
}

// write writes every file asked for from run r. Errors name the flag and
// the file.
func (o *formatOutputs) write(r *report.Run) error {
	if o.hgrm.fh != nil {
		for _, hf := range report.HgrmFiles(r) {
			out := o.hgrm
			if hf.Name != "latency" {
				var err error
				if out, err = openOutput("--hgrm", hgrmPath(o.f.hgrm, hf.Name)); err != nil {
					return err
				}
			}
			if err := out.write(func(w io.Writer) error {
				return report.WriteHgrm(w, hf.Histogram, report.HgrmTicksPerHalfDistance, report.HgrmScale)
			}); err != nil {
				return err
			}
		}
	}
	if o.hlog.fh != nil {
		if err := o.hlog.write(func(w io.Writer) error { return report.WriteHlog(w, r) }); err != nil {
			return err
		}
	}
	if o.csv.fh != nil {
		if err := o.csv.write(func(w io.Writer) error { return report.WriteCSV(w, r, o.perAgent) }); err != nil {
			return err
		}
	}
	return nil
}

// write replaces the file's content with what render writes and closes it.
func (o *output) write(render func(io.Writer) error) error {
	fh := o.fh
	o.fh = nil
	err := fh.Truncate(0)
	if err == nil {
		err = render(fh)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.flag, o.name, err)
	}
	return nil
}

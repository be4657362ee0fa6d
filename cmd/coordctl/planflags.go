package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// applyTargetFlags sets the target flags coordctl search and ab share on
// p: --insecure, --http2, -H (each 'Name: value') and --cacert (a PEM
// file, read now). Errors name the flag.
func applyTargetFlags(p *plan.Plan, insecure, http2 bool, headers []string, caFile string) error {
	p.TLS.Insecure = insecure
	if http2 {
		p.Protocol = plan.H2
	}
	for _, h := range headers {
		hd, ok := plan.ParseHeader(h)
		if !ok {
			return &usageError{fmt.Errorf("-H %s: want 'Name: value'", plan.BadHeader(h))}
		}
		p.Headers = append(p.Headers, hd)
	}
	if caFile != "" {
		var err error
		if p.TLS.CAPEM, err = os.ReadFile(caFile); err != nil {
			return &usageError{fmt.Errorf("--cacert: %w", err)}
		}
		if err := plan.CheckCABundle(p.TLS.CAPEM); err != nil {
			return &usageError{fmt.Errorf("--cacert %s: %w", caFile, err)}
		}
		p.TLS.CAFile = caFile
	}
	return nil
}

// pacingFlagErrors rewrites, in err (a plan's joined field errors), the
// pacing_window and pacing_spin fields' errors to name the
// --pacing-window and --pacing-spin flags that set them, as coordctl run
// names its flags; the others are left as they are.
func pacingFlagErrors(err error) error {
	errs := joined(err)
	out := make([]error, len(errs))
	for i, e := range errs {
		var fe *plan.FieldError
		if errors.As(e, &fe) {
			switch fe.Field {
			case "pacing_window":
				e = fmt.Errorf("--pacing-window %s: %s", fe.Value, fe.Allowed)
			case "pacing_spin":
				e = fmt.Errorf("--pacing-spin: %s", fe.Allowed)
			}
		}
		out[i] = e
	}
	return errors.Join(out...)
}

// buildStored returns a stored run's model and report.
func buildStored(r *pb.StoredRun) (*report.Run, *report.Report, error) {
	run, err := wire.RunFromStored(r)
	if err != nil {
		return nil, nil, err
	}
	rep, err := report.Build(run)
	return run, rep, err
}

// buildResult returns a run result's model and report.
func buildResult(res *pb.RunResult) (*report.Run, *report.Report, error) {
	run, err := wire.RunFromProto(res)
	if err != nil {
		return nil, nil, err
	}
	rep, err := report.Build(run)
	return run, rep, err
}

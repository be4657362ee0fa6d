package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/plan"
)

// runArgs checks run's arguments: one URL, one plan file, or a plan file
// and then a URL that replaces the plan's url (plan.Retarget), as a user of
// k6 or wrk points a script at a server.
func runArgs(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 1:
		return nil
	case len(args) == 2 && isPlanFile(args[0]) && !isPlanFile(args[1]):
		return nil
	case len(args) == 2 && isPlanFile(args[0]):
		return &usageError{fmt.Errorf("run takes one plan file, then optionally a URL to run it against; %q is a plan file too (see coordctl run --help)", args[1])}
	case len(args) == 2:
		return &usageError{fmt.Errorf("run takes a URL, or a plan file then a URL; %q is not a plan file (.yaml, .yml) (see coordctl run --help)", args[0])}
	}
	return &usageError{fmt.Errorf("run takes a URL, or a plan file and optionally a URL, got %d arguments (see coordctl run --help)", len(args))}
}

// cutStages applies -d to a plan file's stages: a window shorter than
// their total cuts them there (plan.CutStages: the ramps keep their slope,
// the later stages are dropped). It returns what it did, for stderr, since
// the run then differs from the file ("" when it did nothing: no -d, no
// stages, or -d their total).
func cutStages(cmd *cobra.Command, file string, p *plan.Plan) (string, error) {
	if file == "" || !cmd.Flags().Changed("duration") || len(p.Stages) == 0 {
		return "", nil
	}
	var total time.Duration
	for _, s := range p.Stages {
		total += s.Duration
	}
	stages := len(p.Stages)
	kept, err := p.CutStages(p.Duration)
	if err != nil {
		return "", &usageError{flagErrors(cmd, file, err)}
	}
	if p.Duration == total {
		return "", nil
	}
	unit := "connections"
	switch {
	case p.ConnectionRate:
		unit = "connections/s"
	case p.OpenLoop():
		unit = "requests/s"
	}
	return fmt.Sprintf("-d %v cuts the stages of %s (%v) at %v: %d of %d stages run, the last ending at %d %s",
		p.Duration, file, total, p.Duration, kept, stages, p.StageTarget(kept-1), unit), nil
}

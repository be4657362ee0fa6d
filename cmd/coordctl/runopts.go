package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/threshold"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// exitThresholds: a threshold failed (k6's status for the same, 99), or
// --abort-on-fail ended the run on one. A run that was not whole exits 4
// or 5 instead; a failed threshold wins over a user's stop (3).
const exitThresholds = 99

// runOptions are coordctl run's flags besides the plan's: thresholds, the
// abort, and the labels the run store keeps.
type runOptions struct {
	thresholds  []string
	abortOnFail bool
	abortDelay  wrkDuration
	abortWindow wrkDuration
	tags        []string
	note        string
}

// addFlags adds the options' flags to fl.
func (o *runOptions) addFlags(fl *pflag.FlagSet) {
	o.abortDelay, o.abortWindow = wrkDuration(coordinator.DefaultAbortDelay), wrkDuration(coordinator.DefaultAbortWindow)
	fl.StringArrayVar(&o.thresholds, "threshold", nil, "pass/fail criterion on the window, repeatable: p99<3ms, failed<0.1%, rps>1000, tls_full.p99<20ms, stage1.p99<5ms, or k6's p(95)<3ms, avg<2ms, rate<0.01; errors counts the report's Errors line (requests that got no response), failed adds its Non-2xx or 3xx responses (k6's http_req_failed; rate is its ratio); a failed one exits 99")
	fl.BoolVar(&o.abortOnFail, "abort-on-fail", false, "end the run early when a threshold fails in every interval for --abort-window, after --abort-delay")
	fl.Var(&o.abortDelay, "abort-delay", "--abort-on-fail grace period: intervals starting earlier in the window never abort")
	fl.Var(&o.abortWindow, "abort-window", "--abort-on-fail: how long a threshold must fail, interval after interval, to end the run")
	fl.StringArrayVar(&o.tags, "tag", nil, "label stored with the run, repeatable (coordctl runs --tag T)")
	fl.StringVar(&o.note, "note", "", "free text stored with the run")
}

// check validates the options against a plan of stages stages: each
// threshold parses and names a stage the plan has, --abort-on-fail has
// one. Errors name the flag.
func (o *runOptions) check(set func(string) bool, stages int) error {
	ts, err := threshold.ParseAll(o.thresholds)
	if err == nil {
		err = threshold.CheckStages(ts, stages)
	}
	if err != nil {
		return &usageError{fmt.Errorf("--threshold: %w", err)}
	}
	if o.abortOnFail && len(o.thresholds) == 0 {
		return &usageError{fmt.Errorf("--abort-on-fail: no --threshold to abort on")}
	}
	if !o.abortOnFail && (set("abort-delay") || set("abort-window")) {
		return &usageError{fmt.Errorf("--abort-delay and --abort-window apply only with --abort-on-fail")}
	}
	for _, t := range o.tags {
		if strings.TrimSpace(t) == "" || strings.Contains(t, ",") {
			return &usageError{fmt.Errorf("--tag %q: want a non-empty label without commas", t)}
		}
	}
	return nil
}

// request returns the RunPlan request of plan p with the options.
func (o *runOptions) request(p *pb.Plan) *pb.RunPlanRequest {
	req := &pb.RunPlanRequest{Plan: p, Thresholds: o.thresholds, AbortOnFail: o.abortOnFail, Tags: o.tags, Note: o.note}
	if o.abortOnFail {
		req.AbortDelay = durationpb.New(time.Duration(o.abortDelay))
		req.AbortWindow = durationpb.New(time.Duration(o.abortWindow))
	}
	return req
}

// thresholdsFailed returns exit status 99 with a message naming the
// failed thresholds (and the one that aborted the run), or nil when every
// threshold passed.
func thresholdsFailed(rep *report.Report) error {
	failed := rep.Failed()
	if len(failed) == 0 && rep.AbortedByThreshold == "" {
		return nil
	}
	msg := fmt.Sprintf("run %s: %d of %d thresholds failed: %s", rep.RunID, len(failed), len(rep.Thresholds), strings.Join(failed, ", "))
	if rep.AbortedByThreshold != "" {
		msg += fmt.Sprintf("; aborted by %s at %.2fs (--abort-on-fail)", rep.AbortedByThreshold, rep.AbortedAtS)
	}
	return &exitError{exitThresholds, fmt.Errorf("%s", msg)}
}

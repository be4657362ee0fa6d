package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/compare"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// newCompareCmd compares two sets of stored runs (internal/compare).
func newCompareCmd(co *coordinatorFlags) *cobra.Command {
	var (
		sf       storeFlags
		include  bool
		asJSON   bool
		seed     uint64
		htmlFile string
	)
	cmd := &cobra.Command{
		Use:   "compare RUNS_A RUNS_B",
		Short: "Compare baseline runs A with candidate runs B: medians, delta %, 95 % CI, Mann-Whitney p-value (benchstat's method)",
		Long: `Compare baseline runs A with candidate runs B. Each side is a comma-separated
list of run IDs, tag:NAME (every stored run with that tag) or .phx files
(coordctl export). For RPS, p50, p90, p99, p99.9, error rate and each phase's
p99 it prints both sides' medians, the delta in %, its 95 % CI and the
Mann-Whitney U p-value; the delta is "~" when p ≥ 0.05 (as benchstat). It
needs at least 4 runs per side, or exactly one per side: then a bootstrap over
the two runs' intervals gives the CI (labelled so). Client-bound runs are left
out unless --include-client-bound. Runs whose plans differ are named above the
table with the settings that differ (secrets redacted): the candidate's first
run against the baseline's, and each run against its side's first. --html FILE
also writes the comparison as one self-contained HTML page: the same table,
both sides' latency timelines and percentile spectra overlaid.`,
		Example: `  coordctl compare tag:baseline tag:optimized
  coordctl compare --html ab.html 20261202T034001Z-3fa9c1,20261202T034101Z-07aa12 run-b.phx`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			htmlOut, err := openHTMLOutput(htmlFile)
			if err != nil {
				return err
			}
			defer htmlOut.discard()
			st, closeStore, err := sf.open(co)
			if err != nil {
				return err
			}
			defer closeStore()
			var sides [2][]compare.Run
			for i, arg := range args {
				if sides[i], err = loadRuns(cmd.Context(), st, arg); err != nil {
					return err
				}
			}
			res, err := compare.Compare(sides[0], sides[1], include, seed)
			if err != nil {
				writeExcluded(cmd.ErrOrStderr(), res)
				return err
			}
			if err := writeComparison(cmd.OutOrStdout(), res, asJSON); err != nil {
				return err
			}
			return htmlOut.writeCompareHTML(res, sides[0], sides[1])
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&include, "include-client-bound", false, "keep client-bound runs (flagged) instead of leaving them out")
	fl.BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	fl.Uint64Var(&seed, "seed", 1, "seed of the one-run bootstrap (the same seed gives the same CI)")
	fl.StringVar(&htmlFile, "html", "", "also write the comparison as one self-contained HTML page (table, overlaid timelines and spectra) to this file")
	sf.add(fl)
	return cmd
}

// loadRuns resolves one side: comma-separated run IDs, tag:NAME or .phx
// files.
func loadRuns(ctx context.Context, st runStore, arg string) ([]compare.Run, error) {
	var out []compare.Run
	for _, item := range strings.Split(arg, ",") {
		item = strings.TrimSpace(item)
		var stored []*pb.StoredRun
		switch {
		case item == "":
			continue
		case strings.HasPrefix(item, "tag:"):
			c, cancel := context.WithTimeout(ctx, storeCall)
			sums, err := st.list(c, &pb.ListRunsRequest{Tags: []string{strings.TrimPrefix(item, "tag:")}})
			cancel()
			if err != nil {
				return nil, err
			}
			if len(sums) == 0 {
				return nil, fmt.Errorf("compare: %s: no stored run has that tag", item)
			}
			for _, s := range sums {
				r, err := getRun(ctx, st, s.GetRun().GetRunId())
				if err != nil {
					return nil, err
				}
				stored = append(stored, r)
			}
		case strings.HasSuffix(item, ".phx"):
			b, err := os.ReadFile(item)
			if err != nil {
				return nil, fmt.Errorf("compare: %w", err)
			}
			r, err := store.ReadFile(b)
			if err != nil {
				return nil, fmt.Errorf("compare: %s: %w", item, err)
			}
			stored = append(stored, r)
		default:
			r, err := getRun(ctx, st, item)
			if err != nil {
				return nil, err
			}
			stored = append(stored, r)
		}
		for _, r := range stored {
			run, rep, err := buildStored(r)
			if err != nil {
				return nil, fmt.Errorf("compare: run %s: %w", r.GetRunId(), err)
			}
			out = append(out, compare.Run{Report: rep, Run: run, Plan: wire.PlanFromProto(r.GetPlan())})
		}
	}
	if len(out) == 0 {
		return nil, &usageError{fmt.Errorf("compare: %q names no run", arg)}
	}
	return out, nil
}

func getRun(ctx context.Context, st runStore, id string) (*pb.StoredRun, error) {
	c, cancel := context.WithTimeout(ctx, storeCall)
	defer cancel()
	return st.get(c, id, true)
}

func writeExcluded(w io.Writer, res *compare.Result) {
	if res == nil {
		return
	}
	for _, n := range res.ExcludedNotes() {
		fmt.Fprintln(w, n)
	}
}

// writeComparison prints res as a table (or JSON).
func writeComparison(w io.Writer, res *compare.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "baseline:  %d run(s) %s\ncandidate: %d run(s) %s\nmethod:    %s, α = %.2f, %.0f %% CI\n",
		len(res.Baseline), strings.Join(res.Baseline, ","), len(res.Candidate), strings.Join(res.Candidate, ","), res.Method, compare.Alpha, compare.Confidence*100)
	for _, n := range res.Notes() {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(compare.TableHeader, "\t"))
	for _, row := range res.Rows() {
		fmt.Fprintln(tw, strings.Join(row.Cells, "\t"))
	}
	return tw.Flush()
}

// abFlags are coordctl ab's flags.
type abFlags struct {
	a, b                 string
	repeats              int
	duration             windowDuration
	warmup               wrkDuration
	pacingWindow         wrkDuration
	pacingSpin           bool
	timeout              wrkDuration
	connections, maxConn int
	rate                 int64
	agents               int
	caFile               string
	insecure, http2      bool
	headers              []string
	tags                 []string
	include, asJSON      bool
	quiet                bool
	htmlFile             string
}

// abSide returns the side of coordctl ab's run i (from 0): 0 for A, 1 for
// B, in pairs whose order alternates (A B, B A, A B, ...: an ABBA
// counterbalanced order), so that a steady drift over the runs (the
// client or the server warming, a cache filling) adds as much to A's runs
// as to B's with an even --repeats, and 1/--repeats of one run's step more
// to B's with an odd one, where A B A B ... adds a whole step to B's.
func abSide(i int) int { return i%2 ^ (i/2)%2 }

// newABCmd runs A and B interleaved (A B B A ...) and compares them.
func newABCmd(co *coordinatorFlags) *cobra.Command {
	f := abFlags{duration: windowDuration(5 * time.Second), timeout: wrkDuration(plan.DefaultTimeout)}
	cmd := &cobra.Command{
		Use:   "ab --a URL_A --b URL_B [flags]",
		Short: "Run baseline A and candidate B interleaved (A B B A ...), tag them and compare them (coordctl compare)",
		Long: `Run baseline A and candidate B --repeats times each, interleaved in pairs
whose order alternates (A B B A A B ...), so that drift on the client or the
server, even a steady one, hits both equally. Every run is stored with
the tags ab:ID, ab:ID:a or ab:ID:b (and --tag), and the comparison is printed
as coordctl compare prints it (coordctl compare tag:ab:ID:a tag:ab:ID:b shows
it again). --html FILE also writes the comparison's HTML page (coordctl
compare --html).`,
		Example: `  coordctl ab --a https://baseline.example/ --b https://optimized.example/ --repeats 5 -c 64 -d 10s --html ab.html`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.a == "" || f.b == "" {
				return &usageError{errors.New("ab: give both --a URL and --b URL")}
			}
			if f.repeats < 1 || (f.repeats > 1 && f.repeats < compare.MinRuns) {
				// Refused before any run: the comparison would refuse
				// them after (compare.ErrTooFew).
				return &usageError{fmt.Errorf("ab: --repeats %d: want 1 (a bootstrap over intervals) or at least %d (Mann-Whitney U)", f.repeats, compare.MinRuns)}
			}
			pa, err := f.plan(f.a)
			if err != nil {
				return err
			}
			if n := (pa.Duration + pa.Interval - 1) / pa.Interval; f.repeats == 1 && n < compare.MinIntervals {
				// Refused before any run, as the comparison would refuse
				// them after (compare.ErrTooFewIntervals).
				return &usageError{fmt.Errorf("ab: --repeats 1 -d %s: %d interval(s) of %s per run; the bootstrap over intervals needs at least %d (-d %s or more), or give --repeats %d or more",
					pa.Duration, n, pa.Interval, compare.MinIntervals, time.Duration(compare.MinIntervals)*pa.Interval, compare.MinRuns)}
			}
			htmlOut, err := openHTMLOutput(f.htmlFile)
			if err != nil {
				return err
			}
			defer htmlOut.discard()
			pbl, err := f.plan(f.b)
			if err != nil {
				return err
			}
			client, closeConn, err := co.dial()
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			id := "ab-" + strings.TrimPrefix(newSearchID(), "search-")
			stderr := cmd.ErrOrStderr()
			var sides [2][]compare.Run
			for i := 0; i < 2*f.repeats; i++ {
				s := abSide(i)
				side, p := "a", pa
				if s == 1 {
					side, p = "b", pbl
				}
				if !f.quiet {
					fmt.Fprintf(stderr, "ab %s: run %d of %d (%s, %s) ...\n", id, i+1, 2*f.repeats, strings.ToUpper(side), p.URL)
				}
				req := &pb.RunPlanRequest{Plan: wire.PlanToProto(p), Tags: append([]string{"ab:" + id, "ab:" + id + ":" + side}, f.tags...),
					Note: fmt.Sprintf("coordctl ab %s, side %s, repeat %d", id, strings.ToUpper(side), i/2+1)}
				res, err := submit(ctx, client, co.addr, req, newProgressView(stderr, p, true), nil, nil)
				if err != nil {
					return fmt.Errorf("ab %s: run %d (%s): %w", id, i+1, side, err)
				}
				run, rep, err := buildResult(res)
				if err != nil {
					return err
				}
				sides[s] = append(sides[s], compare.Run{Report: rep, Run: run})
			}
			res, err := compare.Compare(sides[0], sides[1], f.include, 1)
			if err != nil {
				writeExcluded(stderr, res)
				return fmt.Errorf("ab %s: %w", id, err)
			}
			if !f.asJSON {
				pacing := ""
				for _, ph := range report.PacingPhrases(pa.PacingWindow, pa.PacingSpin) {
					pacing += "; " + ph
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ab %s: A = %s, B = %s (tags ab:%s:a, ab:%s:b)%s\n", id, f.a, f.b, id, id, pacing)
			}
			if err := writeComparison(cmd.OutOrStdout(), res, f.asJSON); err != nil {
				return err
			}
			return htmlOut.writeCompareHTML(res, sides[0], sides[1])
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVar(&f.a, "a", "", "baseline URL")
	fl.StringVar(&f.b, "b", "", "candidate URL")
	fl.IntVar(&f.repeats, "repeats", 5, "runs of each side (at least 4 for a Mann-Whitney verdict; 1: a bootstrap over intervals)")
	fl.VarP(&f.duration, "duration", "d", "each run's measurement window")
	fl.Var(&f.warmup, "warmup", "each run's warm-up before its window")
	fl.IntVarP(&f.connections, "connections", "c", plan.DefaultConnections, "connections to open (total)")
	fl.Int64VarP(&f.rate, "rate", "R", 0, "open loop: target requests/s (0: closed loop, as wrk)")
	fl.IntVar(&f.maxConn, "max-connections", 0, "open loop: connections a run may open when all are busy (default: 4 × -c)")
	fl.Var(&f.pacingWindow, "pacing-window", "open loop (-R): round intended send times down to multiples of this window, e.g. 1ms, as run --pacing-window; 0 schedules each request at its own instant")
	fl.BoolVar(&f.pacingSpin, "pacing-spin", false, "open loop (-R): spin to each intended send time, as run --pacing-spin")
	fl.Var(&f.timeout, "timeout", "per-request timeout")
	fl.IntVar(&f.agents, "agents", 0, "number of agents to use (default: all live agents)")
	fl.StringVar(&f.caFile, "cacert", "", "PEM file of CA certificates to trust besides the system pool")
	fl.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification")
	fl.BoolVar(&f.http2, "http2", false, "HTTP/2 (ALPN h2, or h2c on an http:// URL)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	fl.StringArrayVar(&f.tags, "tag", nil, "label stored with every run (besides ab:ID and ab:ID:a or :b), repeatable")
	fl.BoolVar(&f.include, "include-client-bound", false, "keep client-bound runs (flagged) in the comparison")
	fl.BoolVar(&f.asJSON, "json", false, "print the comparison as JSON")
	fl.StringVar(&f.htmlFile, "html", "", "also write the comparison as one self-contained HTML page (table, overlaid timelines and spectra) to this file")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no line per run on stderr")
	return cmd
}

// plan returns the plan of one side's runs. Errors name the flag.
func (f *abFlags) plan(url string) (plan.Plan, error) {
	if f.timeout == 0 {
		return plan.Plan{}, &usageError{errZeroTimeout}
	}
	p := plan.Plan{URL: url, Method: plan.DefaultMethod, Connections: f.connections, Duration: time.Duration(f.duration),
		Warmup: time.Duration(f.warmup), Timeout: time.Duration(f.timeout), Interval: plan.DefaultInterval, Agents: f.agents, Load: plan.ClosedLoop,
		PacingWindow: time.Duration(f.pacingWindow), PacingSpin: f.pacingSpin} // refused without -R by Validate
	if f.rate > 0 {
		p.Load, p.Rate, p.MaxConnections = plan.OpenLoop, f.rate, f.maxConn
		if p.MaxConnections == 0 {
			p.MaxConnections = 4 * f.connections
		}
	}
	if err := applyTargetFlags(&p, f.insecure, f.http2, f.headers, f.caFile); err != nil {
		return p, err
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return p, &usageError{fmt.Errorf("ab: %s: %w", url, pacingFlagErrors(err))}
	}
	return p, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/store"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// runStore is the run store as the store commands reach it: the
// coordinator's over gRPC (CoordinatorService ListRuns, GetRun, DeleteRun,
// ImportRun: authenticated as every call), or a data directory opened
// directly.
type runStore interface {
	list(ctx context.Context, req *pb.ListRunsRequest) ([]*pb.RunSummary, error)
	// get returns a stored run; forReport leaves out the intervals of a
	// run that has a result (store.GetForReport).
	get(ctx context.Context, id string, forReport bool) (*pb.StoredRun, error)
	remove(ctx context.Context, id string) error
	put(ctx context.Context, r *pb.StoredRun) error
}

// storeFlags say where the store commands find the run store: the
// coordinator (--coordinator, the default), --data-dir DIR, or --local
// (the per-user directory of coordctl demo's runs, store.UserDir).
type storeFlags struct {
	dataDir string
	local   bool
}

func (sf *storeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&sf.dataDir, "data-dir", "", "open this run store directory directly instead of asking the coordinator (no coordinator may be running on it)")
	fl.BoolVar(&sf.local, "local", false, "open the per-user run store of coordctl demo ($XDG_DATA_HOME/phalanx, else ~/.local/share/phalanx)")
}

// open returns the run store the flags name, and its closer.
func (sf *storeFlags) open(co *coordinatorFlags) (runStore, func(), error) {
	dir := sf.dataDir
	if sf.local {
		if dir != "" {
			return nil, nil, &usageError{errors.New("--local and --data-dir name two stores: give one")}
		}
		d, err := store.UserDir()
		if err != nil {
			return nil, nil, err
		}
		dir = d
	}
	if dir != "" {
		st, err := store.Open(dir)
		if errors.Is(err, store.ErrInUse) {
			return nil, nil, fmt.Errorf("%w (a coordinator running on it? ask it with --coordinator instead)", err)
		}
		if err != nil {
			return nil, nil, err
		}
		return localStore{st}, func() { st.Close() }, nil
	}
	client, closeConn, err := co.dial()
	if err != nil {
		return nil, nil, err
	}
	return remoteStore{client, co.addr}, closeConn, nil
}

// get returns stored run id from the store the flags name.
func (sf *storeFlags) get(ctx context.Context, co *coordinatorFlags, id string, forReport bool) (*pb.StoredRun, error) {
	st, closeStore, err := sf.open(co)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(ctx, storeCall)
	defer cancel()
	return st.get(ctx, id, forReport)
}

// localStore is a data directory opened by coordctl itself.
type localStore struct{ st *store.Store }

func (l localStore) list(_ context.Context, req *pb.ListRunsRequest) ([]*pb.RunSummary, error) {
	f := store.Filter{Tags: req.GetTags(), Target: req.GetTarget(), SearchID: req.GetSearchId(), Limit: int(req.GetLimit())}
	if n := req.GetSinceUnixNano(); n != 0 {
		f.Since = time.Unix(0, n)
	}
	return l.st.List(f)
}
func (l localStore) get(_ context.Context, id string, forReport bool) (*pb.StoredRun, error) {
	if forReport {
		return l.st.GetForReport(id)
	}
	return l.st.Get(id)
}
func (l localStore) remove(_ context.Context, id string) error    { return l.st.Delete(id) }
func (l localStore) put(_ context.Context, r *pb.StoredRun) error { return l.st.Import(r) }

// remoteStore is the coordinator's run store.
type remoteStore struct {
	c    pb.CoordinatorServiceClient
	addr string
}

func (r remoteStore) wrap(err error) error {
	if err == nil {
		return nil
	}
	return &prefixedError{"coordinator " + r.addr, err}
}

func (r remoteStore) list(ctx context.Context, req *pb.ListRunsRequest) ([]*pb.RunSummary, error) {
	resp, err := r.c.ListRuns(ctx, req)
	return resp.GetRuns(), r.wrap(err)
}

func (r remoteStore) get(ctx context.Context, id string, forReport bool) (*pb.StoredRun, error) {
	resp, err := r.c.GetRun(ctx, &pb.GetRunRequest{RunId: id, ForReport: forReport})
	return resp.GetRun(), r.wrap(err)
}

func (r remoteStore) remove(ctx context.Context, id string) error {
	_, err := r.c.DeleteRun(ctx, &pb.DeleteRunRequest{RunId: id})
	return r.wrap(err)
}

func (r remoteStore) put(ctx context.Context, run *pb.StoredRun) error {
	_, err := r.c.ImportRun(ctx, &pb.ImportRunRequest{Run: run})
	return r.wrap(err)
}

// storeCall bounds each store command's calls.
const storeCall = 30 * time.Second

// newStoreCmds returns runs, report, export, import and rm.
func newStoreCmds(co *coordinatorFlags) []*cobra.Command {
	return []*cobra.Command{newRunsCmd(co), newReportCmd(co), newExportCmd(co), newImportCmd(co), newRmCmd(co)}
}

// runRow is one run of coordctl runs --json.
type runRow struct {
	RunID      string    `json:"run_id"`
	AcceptedAt time.Time `json:"accepted_at"`
	// State is wire.StateText of the run's state, but "partial" for a
	// finished run that lost an agent (its result's partial).
	State            string   `json:"state"`
	Partial          bool     `json:"partial"`
	Target           string   `json:"target"`
	Tags             []string `json:"tags"`
	Note             string   `json:"note,omitempty"`
	SearchID         string   `json:"search_id,omitempty"`
	WindowS          float64  `json:"window_s"`
	Requests         int64    `json:"requests"`
	RPS              float64  `json:"rps"`
	Errors           int64    `json:"errors"`
	P99Us            int64    `json:"p99_us"`
	Intervals        int32    `json:"intervals"`
	Thresholds       []string `json:"thresholds,omitempty"`
	ThresholdsFailed []string `json:"thresholds_failed,omitempty"`
	Error            string   `json:"error,omitempty"`
}

func newRunRow(s *pb.RunSummary) runRow {
	r := s.GetRun()
	row := runRow{RunID: r.GetRunId(), AcceptedAt: time.Unix(0, r.GetAcceptedAtUnixNano()).UTC(), State: wire.StateText(r.GetState()),
		Target: r.GetPlan().GetUrl(), Tags: r.GetTags(), Note: r.GetNote(), SearchID: r.GetSearchId(), WindowS: s.GetWindowS(),
		Requests: s.GetRequests(), RPS: s.GetRps(), Errors: s.GetErrors(), P99Us: s.GetP99Us(), Intervals: s.GetIntervals(),
		Thresholds: r.GetThresholds(), ThresholdsFailed: s.GetThresholdsFailed(), Error: r.GetError()}
	if s.GetPartial() {
		row.Partial = true
		if r.GetState() == pb.RunState_RUN_STATE_FINISHED {
			row.State = "partial"
		}
	}
	if row.Tags == nil {
		row.Tags = []string{}
	}
	return row
}

func newRunsCmd(co *coordinatorFlags) *cobra.Command {
	var (
		sf       storeFlags
		tags     []string
		target   string
		since    string
		searchID string
		limit    int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the stored runs, newest first",
		Example: `  coordctl runs --tag baseline --since 24h
  coordctl runs --local            # the runs of coordctl demo
  coordctl runs --json | jq '.[0].run_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &pb.ListRunsRequest{Tags: tags, Target: target, SearchId: searchID, Limit: int32(limit)}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return &usageError{fmt.Errorf("--since %q: %w", since, err)}
				}
				req.SinceUnixNano = t.UnixNano()
			}
			st, closeStore, err := sf.open(co)
			if err != nil {
				return err
			}
			defer closeStore()
			ctx, cancel := context.WithTimeout(cmd.Context(), storeCall)
			defer cancel()
			runs, err := st.list(ctx, req)
			if err != nil {
				return err
			}
			rows := make([]runRow, 0, len(runs))
			for _, s := range runs {
				rows = append(rows, newRunRow(s))
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return writeRuns(cmd.OutOrStdout(), rows)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&tags, "tag", nil, "only runs with this tag (repeatable: every one)")
	fl.StringVar(&target, "target", "", "only runs whose URL contains this")
	fl.StringVar(&since, "since", "", "only runs accepted since: a duration back from now (24h, 30m) or a date (2026-12-01, RFC 3339)")
	fl.StringVar(&searchID, "search", "", "only the steps of this capacity search")
	fl.IntVar(&limit, "limit", 0, "at most this many, the newest (default: all)")
	fl.BoolVar(&asJSON, "json", false, "print the list as JSON")
	sf.add(fl)
	return cmd
}

// parseSince reads --since: a duration back from now, or a date
// (2006-01-02, UTC) or RFC 3339 instant.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := plan.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("want a duration back from now (24h, 30m) or a date (2026-12-01, 2026-12-01T10:00:00Z)")
}

// writeRuns prints rows as a table.
func writeRuns(w io.Writer, rows []runRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no stored runs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tSTARTED (UTC)\tSTATE\tWINDOW\tREQ/S\tP99\tERRORS\tTHRESHOLDS\tTARGET\tTAGS")
	for _, r := range rows {
		p99 := "-"
		if r.P99Us > 0 {
			p99 = report.FormatMicros(float64(r.P99Us))
		}
		th := "-"
		if n := len(r.Thresholds); n > 0 {
			th = fmt.Sprintf("%d/%d pass", n-len(r.ThresholdsFailed), n)
		}
		tags := strings.Join(r.Tags, ",")
		if tags == "" {
			tags = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fs\t%.2f\t%s\t%d\t%s\t%s\t%s\n", r.RunID, r.AcceptedAt.Format("2006-01-02 15:04:05"), r.State,
			r.WindowS, r.RPS, p99, r.Errors, th, r.Target, tags)
	}
	return tw.Flush()
}

// reportFormats are the formats coordctl report renders a stored run in,
// from its decoded run and its report: one row per format, so that a new
// format is one more row.
var reportFormats = map[string]func(w io.Writer, run *report.Run, rep *report.Report) error{
	"text": func(w io.Writer, _ *report.Run, rep *report.Report) error {
		return rep.WriteText(w, report.TextOptions{Latency: true})
	},
	"json":   func(w io.Writer, _ *report.Run, rep *report.Report) error { return rep.WriteJSON(w) },
	"h2load": func(w io.Writer, _ *report.Run, rep *report.Report) error { return rep.WriteH2load(w) },
	"csv":    func(w io.Writer, run *report.Run, _ *report.Report) error { return report.WriteCSV(w, run, false) },
	"csv-per-agent": func(w io.Writer, run *report.Run, _ *report.Report) error {
		return report.WriteCSV(w, run, true)
	},
	"hlog": func(w io.Writer, run *report.Run, _ *report.Report) error { return report.WriteHlog(w, run) },
	"html": func(w io.Writer, run *report.Run, rep *report.Report) error {
		return report.WriteHTML(w, run, rep, report.HTMLOptions{})
	},
}

func formatNames() string {
	names := make([]string, 0, len(reportFormats))
	for n := range reportFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func newReportCmd(co *coordinatorFlags) *cobra.Command {
	var (
		sf     storeFlags
		format string
	)
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Re-render a stored run's report (a run that did not finish: what it measured)",
		Example: `  coordctl report 20261202T034001Z-3fa9c1
  coordctl report --format json 20261202T034001Z-3fa9c1 > run.json
  coordctl report --format html 20261202T034001Z-3fa9c1 > run.html`,
		Args: exactlyOneRun("report"),
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := reportFormats[format]
			if !ok {
				return &usageError{fmt.Errorf("--format %q: want one of %s", format, formatNames())}
			}
			r, err := sf.get(cmd.Context(), co, args[0], true)
			if err != nil {
				return err
			}
			run, err := wire.RunFromStored(r)
			if err != nil {
				return err
			}
			rep, err := report.Build(run)
			if err != nil {
				return err
			}
			if format == "csv-per-agent" && !run.HasAgentIntervals() {
				fmt.Fprintf(cmd.ErrOrStderr(), "coordctl: run %s kept no per-agent intervals (a run keeps them when started with --csv-per-agent or --hlog): only the merged rows\n", run.ID)
			}
			return write(cmd.OutOrStdout(), run, rep)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: "+formatNames())
	sf.add(cmd.Flags())
	return cmd
}

func newExportCmd(co *coordinatorFlags) *cobra.Command {
	var (
		sf  storeFlags
		out string
	)
	cmd := &cobra.Command{
		Use:     "export RUN",
		Short:   "Write a stored run, with everything the store has of it, as one .phx file",
		Example: `  coordctl export 20261202T034001Z-3fa9c1 > run.phx`,
		Args:    exactlyOneRun("export"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sf.get(cmd.Context(), co, args[0], false)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return store.WriteFile(cmd.OutOrStdout(), r)
			}
			fh, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return &usageError{fmt.Errorf("-o: %w", err)}
			}
			if err := store.WriteFile(fh, r); err != nil {
				fh.Close()
				return err
			}
			return fh.Close()
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	sf.add(cmd.Flags())
	return cmd
}

func newImportCmd(co *coordinatorFlags) *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:     "import FILE.phx...",
		Short:   "Store runs from .phx files (coordctl export's)",
		Example: `  coordctl import run.phx`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{errors.New("import takes one or more .phx files (see coordctl import --help)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			runs := make([]*pb.StoredRun, 0, len(args))
			for _, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				r, err := store.ReadFile(data)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				runs = append(runs, r)
			}
			st, closeStore, err := sf.open(co)
			if err != nil {
				return err
			}
			defer closeStore()
			for i, r := range runs {
				ctx, cancel := context.WithTimeout(cmd.Context(), storeCall)
				err := st.put(ctx, r)
				cancel()
				if err != nil {
					return fmt.Errorf("%s: %w", args[i], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "imported run %s (%s) from %s\n", r.GetRunId(), wire.StateText(r.GetState()), args[i])
			}
			return nil
		},
	}
	sf.add(cmd.Flags())
	return cmd
}

func newRmCmd(co *coordinatorFlags) *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:     "rm RUN...",
		Short:   "Remove stored runs",
		Example: `  coordctl rm 20261202T034001Z-3fa9c1`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{errors.New("rm takes one or more run IDs (see coordctl runs)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			st, closeStore, err := sf.open(co)
			if err != nil {
				return err
			}
			defer closeStore()
			for _, id := range args {
				ctx, cancel := context.WithTimeout(cmd.Context(), storeCall)
				err := st.remove(ctx, id)
				cancel()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed run %s\n", id)
			}
			return nil
		},
	}
	sf.add(cmd.Flags())
	return cmd
}

// exactlyOneRun is the Args check of a command taking one run ID.
func exactlyOneRun(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return &usageError{fmt.Errorf("%s takes exactly one run ID, got %d arguments (see coordctl runs)", name, len(args))}
		}
		return nil
	}
}

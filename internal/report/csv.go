package report

import (
	"encoding/csv"
	"io"
	"strconv"

	"github.com/phalanxload/phalanx/internal/hist"
)

// CSVHeader is the timeline CSV's header row (WriteCSV).
var CSVHeader = []string{
	"index", "start_s", "duration_s", "agent", "requests", "rps", "errors", "missed",
	"target_rps", "target_connections", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "cpu_busy", "partial",
}

// CSVMerged is the agent column of a row merged across agents.
const CSVMerged = "all"

// WriteCSV writes r's timeline as CSV (RFC 4180, encoding/csv), one row per
// interval merged across agents, and with perAgent one row per agent that
// sent the interval after it (only when the result kept agent intervals:
// coordctl run --csv-per-agent asks for them). Columns (CSVHeader):
//
//   - index, start_s, duration_s: the interval k, its offset in the window
//     and its length, seconds (an agent's row: its own interval's bounds,
//     offsets from its window start);
//   - agent: CSVMerged ("all") for the merged row, else the agent's name;
//   - requests, rps, errors, missed: completed responses, their rate over
//     the interval, failed requests, open-loop sends missed;
//   - target_rps (open loop) and target_connections (closed loop): the
//     plan's target at the interval's middle, merged rows only (empty
//     otherwise and when 0);
//   - p50_us ... max_us: latency percentiles from the interval's histogram
//     (µs; HdrHistogram's highest equivalent value), empty with no sample;
//   - cpu_busy: the agent's CPU busy fraction (0-1) of its usable CPUs; in
//     a merged row the busiest agent's;
//   - partial: true when a lost agent is missing from the merged interval.
func WriteCSV(w io.Writer, r *Run, perAgent bool) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	byIndex := make([]map[int32]*AgentInterval, len(r.Agents))
	if perAgent {
		for i := range r.Agents {
			byIndex[i] = map[int32]*AgentInterval{}
			for k := range r.Agents[i].Intervals {
				byIndex[i][r.Agents[i].Intervals[k].Index] = &r.Agents[i].Intervals[k]
			}
		}
	}
	for _, pt := range r.Timeline {
		busiest := 0.0
		for _, b := range pt.CPUBusy {
			busiest = max(busiest, b)
		}
		row := []string{
			itoa(int64(pt.Index)), ftoa(pt.Start.Seconds()), ftoa(pt.Length.Seconds()), CSVMerged,
			itoa(pt.Requests), rate(pt.Requests, pt.Length.Seconds()), itoa(pt.Errors), itoa(pt.Missed),
			nonZero(pt.TargetRPS), nonZero(pt.TargetConnections),
		}
		row = append(row, percentiles(pt.Latency)...)
		row = append(row, ftoa(busiest), strconv.FormatBool(pt.Partial))
		if err := cw.Write(row); err != nil {
			return err
		}
		if !perAgent {
			continue
		}
		for i, a := range r.Agents {
			iv := byIndex[i][pt.Index]
			if iv == nil {
				continue
			}
			busy := ""
			if i < len(pt.CPUBusy) {
				busy = ftoa(pt.CPUBusy[i])
			}
			row := []string{
				itoa(int64(iv.Index)), ftoa(iv.Start.Seconds()), ftoa(iv.Length.Seconds()), a.Name,
				itoa(iv.Requests), rate(iv.Requests, iv.Length.Seconds()), itoa(iv.Errors), itoa(iv.Missed), "", "",
			}
			row = append(row, percentiles(iv.Latency)...)
			row = append(row, busy, "false")
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// percentiles returns h's p50, p90, p99, p99.9 and max as CSV fields, empty
// when h has no sample.
func percentiles(h *hist.Histogram) []string {
	if h == nil || h.Count() == 0 {
		return []string{"", "", "", "", ""}
	}
	return []string{
		itoa(h.ValueAtPercentile(50)), itoa(h.ValueAtPercentile(90)), itoa(h.ValueAtPercentile(99)),
		itoa(h.ValueAtPercentile(99.9)), itoa(h.Max()),
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// ftoa formats f with the fewest digits that read back as f.
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func rate(n int64, s float64) string {
	if s <= 0 {
		return ""
	}
	return strconv.FormatFloat(float64(n)/s, 'f', 2, 64)
}

func nonZero(f float64) string {
	if f == 0 {
		return ""
	}
	return ftoa(f)
}

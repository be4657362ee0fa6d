package report

import (
	"encoding/csv"
	"fmt"
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
	var dec hist.Decoder
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
		lat, err := percentiles(&dec, pt.V2[hist.Latency])
		if err != nil {
			return fmt.Errorf("csv interval %d: %w", pt.Index, err)
		}
		row = append(row, lat...)
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
			lat, err := percentiles(&dec, iv.LatencyV2)
			if err != nil {
				return fmt.Errorf("csv interval %d agent %s: %w", iv.Index, a.Name, err)
			}
			row = append(row, lat...)
			row = append(row, busy, "false")
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// percentiles returns the p50, p90, p99, p99.9 and max of the V2
// histogram b (decoded with dec, sparse) as CSV fields, empty when it has
// no sample. Errors: a corrupt histogram.
func percentiles(dec *hist.Decoder, b []byte) ([]string, error) {
	var s hist.Sparse
	if err := decodeSparse(dec, b, &s); err != nil {
		return nil, err
	}
	if s.Total == 0 {
		return []string{"", "", "", "", ""}, nil
	}
	q := sparsePercentiles(&s, runSubBucketHalfMagnitude, 50, 90, 99, 99.9, 100)
	return []string{itoa(q[0]), itoa(q[1]), itoa(q[2]), itoa(q[3]), itoa(q[4])}, nil
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

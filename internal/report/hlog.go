package report

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
)

// HlogMaxScale is the .hlog files' maxValueUnitRatio: Interval_Max is the
// interval's largest latency in ms (µs / 1000). The histograms themselves
// hold µs, as HistogramLogAnalyzer and HistogramLogProcessor read them
// (give them the unit: -outputValueUnitRatio 1000 prints ms).
const HlogMaxScale = 1000.0

// javaDate is the layout of Java's Date.toString, which HdrHistogram's
// StartTime line carries after the seconds.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

// WriteHlog writes r's latency timeline as an HdrHistogram interval log,
// format version 1.3 (Java's HistogramLogWriter, which hdrhistogram-go's
// HistogramLogReader, HistogramLogProcessor and HistogramLogAnalyzer
// read):
//
//	#[Phalanx run RUN_ID, latency in us (Interval_Max in ms), one line per interval merged across agents and one per agent (Tag=NAME)]
//	#[Histogram log format version 1.3]
//	#[StartTime: 1796083200.000 (seconds since epoch), Mon Nov 30 00:00:00 UTC 2026]
//	#[BaseTime: 1796083200.000 (seconds since epoch)]
//	"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//	0.000,1.000,1.000,HISTFAAAA...
//	Tag=agent-1,0.000,1.000,0.990,HISTFAAAA...
//
// StartTime and BaseTime are the window's start (the start instant plus
// the warm-up), so that each line's StartTimestamp is its interval's
// offset in the window, seconds with 3 decimals. For each interval, in
// index order: the untagged line is the interval merged across agents (the
// result's timeline point),
// then one line per agent that sent the interval, in agent order, tagged
// with the agent's name (a comma, space or line break in it becomes "_",
// which the format forbids), its histogram exactly as the agent sent it.
// The histograms are in HdrHistogram's V2 compressed encoding, base64. A
// run whose result kept no agent intervals has the untagged lines only.
func WriteHlog(w io.Writer, r *Run) error {
	p := &printer{w: w}
	base := r.StartedAt.Add(r.WarmupDuration)
	who := "one line per interval merged across agents and one per agent (Tag=NAME)"
	if !r.HasAgentIntervals() {
		who = "one line per interval merged across agents (no per-agent intervals kept)"
	}
	p.f("#[Phalanx run %s, latency in us (Interval_Max in ms), %s]\n", r.ID, who)
	p.f("#[Histogram log format version 1.3]\n")
	ms := base.UnixMilli()
	p.f("#[StartTime: %.3f (seconds since epoch), %s]\n", float64(ms)/1000, time.UnixMilli(ms).UTC().Format(javaDate))
	p.f("#[BaseTime: %.3f (seconds since epoch)]\n", float64(ms)/1000)
	p.f("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n")
	// Each agent's intervals by index.
	byIndex := make([]map[int32]*AgentInterval, len(r.Agents))
	for i := range r.Agents {
		byIndex[i] = map[int32]*AgentInterval{}
		for k := range r.Agents[i].Intervals {
			iv := &r.Agents[i].Intervals[k]
			byIndex[i][iv.Index] = iv
		}
	}
	for _, pt := range r.Timeline {
		h, err := pt.Histogram(hist.Latency) // one at a time: a full histogram is 229 KB
		if err != nil {
			return fmt.Errorf("hlog interval %d: %w", pt.Index, err)
		}
		enc, err := h.Encode()
		if err != nil {
			return fmt.Errorf("hlog interval %d: %w", pt.Index, err)
		}
		writeHlogLine(p, "", pt.Start, pt.Length, h.Max(), enc)
		for i, a := range r.Agents {
			iv := byIndex[i][pt.Index]
			if iv == nil {
				continue
			}
			h, err := hist.Decode(iv.LatencyV2)
			if err != nil {
				return fmt.Errorf("hlog interval %d agent %s: %w", pt.Index, a.Name, err)
			}
			enc, err := h.Encode()
			if err != nil {
				return fmt.Errorf("hlog interval %d agent %s: %w", pt.Index, a.Name, err)
			}
			writeHlogLine(p, hlogTag(a.Name), iv.Start, iv.Length, h.Max(), enc)
		}
	}
	return p.err
}

// writeHlogLine writes one interval line: [Tag=TAG,]start,length,max,base64.
func writeHlogLine(p *printer, tag string, start, length time.Duration, maxUs int64, enc []byte) {
	if tag != "" {
		p.f("Tag=%s,", tag)
	}
	p.f("%.3f,%.3f,%.3f,%s\n", start.Seconds(), length.Seconds(), float64(maxUs)/HlogMaxScale, base64.StdEncoding.EncodeToString(enc))
}

// hlogTag returns name as an .hlog tag: the format forbids commas, spaces
// and line breaks in it (HistogramLogWriter), each becomes "_".
func hlogTag(name string) string {
	return strings.Map(func(c rune) rune {
		switch c {
		case ',', ' ', '\t', '\r', '\n':
			return '_'
		}
		return c
	}, name)
}

// HasAgentIntervals reports whether r's result kept any agent's intervals:
// a run kept them when asked (RunPlanRequest.agent_intervals: coordctl
// run --hlog or --csv-per-agent).
func (r *Run) HasAgentIntervals() bool {
	for _, a := range r.Agents {
		if len(a.Intervals) > 0 {
			return true
		}
	}
	return false
}

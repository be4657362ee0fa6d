package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// Build computes the report of a run: rates over its window, the
// summaries of its merged histograms (percentiles from histograms only),
// the timeline's percentiles from each interval's histogram, and the
// client-bound analysis. Errors: histograms that cannot be merged.
func Build(r *Run) (*Report, error) {
	hs := r.Histograms
	tlsAll := hist.New()
	if err := tlsAll.Merge(hs.TLSFull); err != nil {
		return nil, err
	}
	if err := tlsAll.Merge(hs.TLSResumed); err != nil {
		return nil, err
	}
	window := r.Window.Seconds()
	c := &r.Counts
	rep := &Report{
		RunID:             r.ID,
		Labels:            r.Labels,
		Verdict:           r.Verdict,
		Target:            r.Target,
		StartedAt:         r.StartedAt.UTC(),
		DurationS:         window,
		PlanDurationS:     r.PlanDuration.Seconds(),
		PlanRequests:      r.PlanRequests,
		StoppedEarly:      r.StoppedEarly,
		Partial:           r.Partial || r.CoordinatorLost != "",
		Aborted:           r.Aborted,
		OnAgentLoss:       r.OnAgentLoss,
		CoordinatorStallS: r.CoordinatorStall.Seconds(),
		CoordinatorLost:   r.CoordinatorLost,
		AgentCount:        max(len(r.Agents), r.AgentCount),
		LostAgents:        slices.Clone(r.LostAgents),
		Connections:       r.Connections,
		Issued:            c.Issued,
		Requests:          c.Requests,
		InFlight:          r.InFlight,
		BytesRead:         c.BytesRead,
		HeaderBytes:       c.HeaderBytes,
		BodyBytes:         c.BodyBytes,
		HeaderFieldBytes:  c.HeaderFieldBytes,
		ContentEncoding:   c.EncodingMap(),
		WithinStdevPct: WithinStdev{Latency: hs.Latency.WithinStdev(), Service: hs.Service.WithinStdev(),
			Connect: hs.Connect.WithinStdev(), TTFB: hs.TTFB.WithinStdev()},
		Status:                statusMap(c),
		Errors:                c.ErrorMap(),
		Latency:               hs.Latency.Summarize(),
		StartSkewUs:           us(r.StartSkew),
		StartSkewUnknown:      r.StartSkewUnknown,
		StartSkewBoundUs:      us(skewBound(r.Agents)),
		ConnectionsOpened:     c.ConnectionsOpened,
		Reconnects:            c.Reconnects,
		Retries:               c.Retries,
		Redirects:             c.Redirects,
		Handshakes:            handshakes(c, r.ResumeRatio),
		ConnectUs:             hs.Connect.Summarize(),
		TLSHandshakeUs:        tlsAll.Summarize(),
		TLSHandshakeFullUs:    hs.TLSFull.Summarize(),
		TLSHandshakeResumedUs: hs.TLSResumed.Summarize(),
		TTFBUs:                hs.TTFB.Summarize(),
		TLS:                   tlsCounts(c.TLS),
		MaxStreams:            r.MaxStreams,
		HTTP3:                 r.HTTP3,
		Mode:                  "closed",
		LatencyBasis:          "actual send",
		Missed:                c.Missed,
		Unsent:                c.Unsent,
		Backlogged:            c.Backlogged,
		GrowthRefused:         c.GrowthRefused,
		Queued:                c.Queued,
		ClientLate:            c.ClientLate,
		Carried:               c.Carried,
	}
	if r.Load == plan.OpenLoop {
		rep.Mode, rep.LatencyBasis = "open", "intended send"
		rep.PacingWindowUs = r.PacingWindow.Microseconds()
		rep.PacingSpin = r.PacingSpin
		rep.ServiceTimeUs = hs.Service.Summarize()
		rep.SendLatenessUs = hs.Lateness.Summarize()
	}
	var dec hist.Decoder
	var s hist.Sparse
	for _, pt := range r.Timeline {
		tp := TimelinePoint{
			Index: pt.Index, StartS: pt.Start.Seconds(), DurationS: pt.Length.Seconds(),
			Requests: pt.Requests, Errors: pt.Errors, Missed: pt.Missed, TargetRPS: pt.TargetRPS,
			TargetConnections: pt.TargetConnections, Agents: pt.Agents, Partial: pt.Partial,
			CPUBusy: pt.CPUBusy, LatencyV2: pt.V2[hist.Latency], GrowthRefused: pt.GrowthRefused,
			Backlogged: pt.Backlogged,
		}
		if err := pt.Sparse(&dec, hist.Latency, &s); err != nil {
			return nil, fmt.Errorf("interval %d latency: %w", pt.Index, err)
		}
		if s.Total > 0 {
			q := sparsePercentiles(&s, runSubBucketHalfMagnitude, 50, 90, 99, 100)
			tp.P50Us, tp.P90Us, tp.P99Us, tp.MaxUs = q[0], q[1], q[2], q[3]
		}
		if r.Load == plan.OpenLoop {
			if err := pt.Sparse(&dec, hist.Lateness, &s); err != nil {
				return nil, fmt.Errorf("interval %d lateness: %w", pt.Index, err)
			}
			if s.Total > 0 {
				tp.LatenessP99Us = sparsePercentiles(&s, runSubBucketHalfMagnitude, 99)[0]
			}
		}
		tp.Connections = pt.Connections
		if tp.DurationS > 0 {
			tp.RPS = float64(tp.Requests) / tp.DurationS
			tp.CPS = float64(tp.Connections) / tp.DurationS
			for _, n := range pt.AgentConnections {
				tp.AgentCPS = append(tp.AgentCPS, float64(n)/tp.DurationS)
			}
		}
		rep.Timeline = append(rep.Timeline, tp)
		rep.TargetRPS += tp.TargetRPS * tp.DurationS
	}
	if window > 0 {
		rep.TargetRPS /= window
	}
	rep.Close = "fin"
	if r.CloseReset {
		rep.Close = "rst"
	}
	if r.ConnectionRate {
		cr := &ConnectionRate{TargetCPS: rep.TargetRPS, Connections: c.ConnectionsOpened, RequestsPerConnection: r.RequestsPerConnection, MaxOpen: r.MaxOpen}
		if window > 0 {
			cr.CPS = float64(cr.Connections) / window
		}
		rep.ConnectionRate, rep.TargetRPS = cr, 0
	}
	for _, st := range r.Stages {
		sr := Stage{
			Index: st.Index, StartS: st.Start.Seconds(), DurationS: st.Duration.Seconds(),
			TargetFrom: st.TargetFrom, TargetTo: st.TargetTo, Requests: st.Counts.Requests,
			Errors: st.Counts.ErrorMap(), Status: statusMap(&st.Counts), Latency: st.Latency.Summarize(),
			ChangeSkewUs: us(st.ChangeSkew),
		}
		if sr.DurationS > 0 {
			sr.RPS = float64(sr.Requests) / sr.DurationS
		}
		rep.Stages = append(rep.Stages, sr)
	}
	if window > 0 {
		rep.RPS = float64(rep.Requests) / window
		rep.TransferBps = float64(rep.BytesRead) / window
	}
	for code, n := range c.StatusMap() {
		if code < 200 || code > 399 {
			rep.Non2xx3xx += n
		} else {
			rep.OKRequests += n
		}
	}
	if window > 0 {
		rep.OKRPS = float64(rep.OKRequests) / window
	}
	if hs.OK != nil {
		rep.OKLatency = hs.OK.Summarize()
	}
	if hs.HandshakeLatency != nil {
		rep.HandshakeLatencyUs = hs.HandshakeLatency.Summarize()
	}
	if wd := r.WarmupDuration; wd > 0 {
		w := &r.Warmup
		rep.Warmup = &Warmup{DurationS: wd.Seconds(), Requests: w.Requests, Status: statusMap(w), Errors: w.ErrorMap()}
	}
	for _, a := range r.Agents {
		row := Agent{
			Name: a.Name, Connections: a.Connections, Requests: a.Requests,
			Errors: a.Errors, InFlight: a.InFlight, CPUs: a.CPUs,
			ClockOffsetUs: us(a.ClockOffset), RTTUs: us(a.RTT),
			StartOffsetUs: us(a.StartOffset), StartOffsetUnknown: a.StartOffsetUnknown, Error: a.Error,
			CPUList: a.CPUList, Missed: a.Missed, ClientLate: a.ClientLate, CPUWaitS: a.CPUWait.Seconds(),
		}
		ran := window // an agent's rates are over the time its own load ran
		if a.Ran > 0 {
			row.RanS = a.Ran.Seconds()
			ran = min(ran, row.RanS)
		}
		if a.Lost {
			row.Lost, row.LostAtS, row.RanS = true, a.LostAt.Seconds(), a.Ran.Seconds()
			ran = min(ran, a.Ran.Seconds())
			rep.LostAgents = append(rep.LostAgents, LostAgent{Name: a.Name, LostAtS: row.LostAtS, RanS: row.RanS,
				Error: a.Error, Connections: a.Connections, Rate: a.Rate})
		}
		if ran > 0 {
			row.RPS = float64(a.Requests) / ran
			if a.CPUs > 0 {
				row.CPUUtil = a.CPUTime.Seconds() / (ran * float64(a.CPUs))
				row.CPUWait = a.CPUWait.Seconds() / (ran * float64(a.CPUs))
			}
		}
		rep.AgentRows = append(rep.AgentRows, row)
	}
	rep.Provenance = provenanceOf(r)
	rep.ReqPerSec = rateStats(reqPerSecSamples(r))
	for i, m := range r.Mix {
		e := MixEntry{Index: i, Method: "GET", Requests: m.Counts.Requests, Status: statusMap(&m.Counts),
			Errors: m.Counts.ErrorMap(), Latency: m.Latency.Summarize()}
		if i < len(r.Requests) {
			e.URL = r.Requests[i].URL
			if r.Requests[i].Method != "" {
				e.Method = r.Requests[i].Method
			}
		}
		rep.Mix = append(rep.Mix, e)
	}
	if len(r.Mix) > 0 {
		rep.MixAgents = r.MixAgents
	}
	rep.flagBound()
	return rep, nil
}

// reqPerSecSamples returns the per-agent rate samples of r: every agent's
// interval rates, or without any (no agent rows) each interval's rate
// over the agents merged in it.
func reqPerSecSamples(r *Run) []float64 {
	var out []float64
	for _, a := range r.Agents {
		out = append(out, a.IntervalRPS...)
	}
	if len(out) > 0 {
		return out
	}
	for _, pt := range r.Timeline {
		if pt.Length > 0 && pt.Agents > 0 {
			out = append(out, float64(pt.Requests)/pt.Length.Seconds()/float64(pt.Agents))
		}
	}
	return out
}

// rateStats summarizes samples as wrk's stats.c does: mean, sample
// standard deviation (n-1), max, and the share within mean ± stdev. Nil
// without samples.
func rateStats(samples []float64) *RateStats {
	if len(samples) == 0 {
		return nil
	}
	st := &RateStats{Samples: len(samples), Min: samples[0]}
	for _, v := range samples {
		st.Mean += v
		st.Min, st.Max = min(st.Min, v), max(st.Max, v)
	}
	st.Mean /= float64(len(samples))
	if len(samples) > 1 {
		var ss float64
		for _, v := range samples {
			ss += (v - st.Mean) * (v - st.Mean)
		}
		st.Stdev = math.Sqrt(ss / float64(len(samples)-1))
	}
	in := 0
	for _, v := range samples {
		if v >= st.Mean-st.Stdev && v <= st.Mean+st.Stdev {
			in++
		}
	}
	st.WithinStdevPct = 100 * float64(in) / float64(len(samples))
	return st
}

// statusMap returns c's non-zero status counts keyed by the code's
// decimal text.
func statusMap(c *measure.Counts) map[string]int64 {
	out := map[string]int64{}
	for code, n := range c.StatusMap() {
		out[strconv.Itoa(code)] = n
	}
	return out
}

// tlsCounts splits "kind:value" keys into per-kind maps.
func tlsCounts(m map[string]int64) TLSCounts {
	t := TLSCounts{Version: map[string]int64{}, Cipher: map[string]int64{}, Group: map[string]int64{}, ALPN: map[string]int64{}}
	for k, n := range m {
		kind, v, _ := strings.Cut(k, ":")
		switch kind {
		case "version":
			t.Version[v] += n
		case "cipher":
			t.Cipher[v] += n
		case "group":
			t.Group[v] += n
		case "alpn":
			t.ALPN[v] += n
		case "transport":
			if t.Transport == nil {
				t.Transport = map[string]int64{}
			}
			t.Transport[v] += n
		}
	}
	return t
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// handshakes counts c's TLS handshakes by what happened, with the resumed
// share, the plan's ratio (planned) and the share that offered a session.
func handshakes(c *measure.Counts, planned float64) Handshakes {
	h := Handshakes{Full: c.HandshakesFull, Resumed: c.HandshakesResumed, Refused: c.HandshakesRefused, ResumeRatioPlanned: planned}
	h.Offered = h.Resumed + h.Refused
	h.EarlyOffered, h.EarlyAccepted = c.HandshakesEarlyOffered, c.HandshakesEarlyAccepted
	h.EarlyRejected = h.EarlyOffered - h.EarlyAccepted
	n := h.Full + h.Resumed
	if n > 0 {
		h.ResumeRatioAchieved = float64(h.Resumed) / float64(n)
	}
	if planned > 0 {
		offered := 0.0
		if n > 0 {
			offered = float64(h.Offered) / float64(n)
		}
		h.ResumeRatioOffered = &offered
	}
	return h
}

// skewBound returns the error bound of the start skew measured across
// agents (Report.StartSkewBoundUs): the sum of the two largest half round
// trips of the clock samples of the agents whose first send is known; 0
// with fewer than two.
func skewBound(agents []AgentRun) time.Duration {
	var a, b time.Duration // the largest half RTTs, a >= b
	n := 0
	for _, ag := range agents {
		if ag.StartOffsetUnknown {
			continue
		}
		n++
		switch h := ag.RTT / 2; {
		case h > a:
			a, b = h, a
		case h > b:
			b = h
		}
	}
	if n < 2 {
		return 0
	}
	return a + b
}

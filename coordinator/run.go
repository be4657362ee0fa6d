package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

var errNoAgents = errors.New("no agents alive")

// agentRun is one agent's part of a run, as the coordinator tracks it.
type agentRun struct {
	meta   *pb.NodeMeta
	share  plan.Share
	conn   *grpc.ClientConn
	stream pb.AgentService_RunClient

	offset, rtt time.Duration // agent clock - coordinator clock; RTT of that sample
	ready       *pb.Ready

	// Written by the merge loop only.
	counters  measure.Counts
	cpu       time.Duration
	cpus      int32
	intervals int
	done      *pb.Done
	ended     bool // the stream ended after Done
	err       error
}

// event is one message (or the end) of one agent's Run stream.
type event struct {
	agent int
	msg   *pb.RunResponse
	err   error
}

// RunHooks are RunPlanWith's callbacks; each may be nil. They are called
// from RunPlanWith's goroutine, in order, and must not block for long.
type RunHooks struct {
	// Accepted is called once, first, when the plan is valid and its
	// agents are chosen, before they prepare: from then until RunPlanWith
	// returns, StopRun(run ID) applies to the run. It is not called for a
	// run refused before (bad plan, no free agents).
	Accepted func(*pb.RunAccepted)
	// Progress is called after each interval has been merged across
	// agents.
	Progress func(*pb.Progress)
}

// activeRun is a run in progress, as StopRun finds it.
type activeRun struct {
	stopOnce sync.Once
	stop     chan struct{} // closed by requestStop
}

// requestStop asks the run to end its window now; idempotent.
func (a *activeRun) requestStop() { a.stopOnce.Do(func() { close(a.stop) }) }

// stopRequested reports whether StopRun was called for the run.
func (a *activeRun) stopRequested() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// StopRun ends the measurement window of run runID early, as a graceful
// Ctrl-C in coordctl does: once the run has started, every agent is sent a
// Stop (it stops issuing requests, lets those in flight finish, bounded by
// the plan's timeout, and sends its last intervals and Done), and RunPlan
// returns the result of the shortened window with RunResult.StoppedEarly
// set. A run whose agents still prepare (before they are sent Start) is
// abandoned instead: RunPlan returns a Canceled status error and nothing is
// measured.
// StopRun returns at once, without waiting for the result; calling it again
// changes nothing. Errors (gRPC status): InvalidArgument for an empty
// runID, NotFound when no run with that ID is in progress on this
// coordinator (never started, or already ended).
func (c *Coordinator) StopRun(runID string) error {
	if runID == "" {
		return status.Error(codes.InvalidArgument, "stop run: run_id is empty")
	}
	c.mu.Lock()
	a := c.active[runID]
	c.mu.Unlock()
	if a == nil {
		return status.Errorf(codes.NotFound, "no run %s in progress on this coordinator (it has ended, or never started)", runID)
	}
	c.log.Info("stop requested: ending the run's window early", "run_id", runID)
	a.requestStop()
	return nil
}

// register records a run in progress for StopRun; unregister forgets it
// (idempotent).
func (c *Coordinator) register(runID string) *activeRun {
	a := &activeRun{stop: make(chan struct{})}
	c.mu.Lock()
	c.active[runID] = a
	c.mu.Unlock()
	return a
}

func (c *Coordinator) unregister(runID string) {
	c.mu.Lock()
	delete(c.active, runID)
	c.mu.Unlock()
}

// RunPlan executes p and returns its merged result. progress, if not nil, is
// called after each interval has been merged across agents. It is
// RunPlanWith with only a Progress hook.
func (c *Coordinator) RunPlan(ctx context.Context, p plan.Plan, progress func(*pb.Progress)) (*pb.RunResult, error) {
	return c.RunPlanWith(ctx, p, RunHooks{Progress: progress})
}

// RunPlanWith executes p and returns its merged result, calling hooks as
// the run goes. When an agent fails mid-run, the result keeps everything
// measured and names the failure in that agent's row; RunPlanWith then
// returns the result and a nil error. StopRun ends the window early: the
// result then covers the shortened window (RunResult.StoppedEarly). Errors
// before the start (bad plan, no agents, an agent that cannot reach the
// target, StopRun while the agents prepare: Canceled) return a nil result
// and a gRPC status error.
func (c *Coordinator) RunPlanWith(ctx context.Context, p plan.Plan, hooks RunHooks) (*pb.RunResult, error) {
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return nil, toStatus(err)
	}
	agents, err := c.selectAgents(p)
	if err != nil {
		return nil, toStatus(err)
	}
	defer c.releaseAgents(agents)
	runID := newRunID()
	log := c.log.With("run_id", runID)
	shares := plan.Shares(runID, p, len(agents))
	active := c.register(runID)
	defer c.unregister(runID)
	if hooks.Accepted != nil {
		hooks.Accepted(&pb.RunAccepted{RunId: runID, Agents: int32(len(agents))})
	}
	progress := hooks.Progress
	stoppedBeforeStart := func() error {
		return status.Errorf(codes.Canceled, "run %s stopped before its start: nothing was measured", runID)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runs := make([]*agentRun, len(agents))
	for i, m := range agents {
		runs[i] = &agentRun{meta: m, share: shares[i], cpus: m.GetCpus()}
	}
	defer func() {
		for _, r := range runs {
			if r.conn != nil {
				r.conn.Close()
			}
		}
	}()

	// Connect, sync clocks, send shares and wait for Ready, all agents in
	// parallel, bounded by PrepareTimeout.
	prepCtx, prepCancel := context.WithTimeout(ctx, c.cfg.PrepareTimeout)
	defer prepCancel()
	// A stop while the agents prepare abandons the preparation at once.
	prepared := make(chan struct{})
	go func() {
		select {
		case <-active.stop:
			prepCancel()
		case <-prepared:
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.prepare(ctx, prepCtx, r)
		}()
	}
	wg.Wait()
	close(prepared)
	if active.stopRequested() {
		log.Info("run stopped before its start")
		return nil, stoppedBeforeStart()
	}
	if err := errors.Join(errs...); err != nil {
		if prepCtx.Err() != nil && ctx.Err() == nil {
			return nil, status.Errorf(codes.DeadlineExceeded, "agents not ready within %v: %v", c.cfg.PrepareTimeout, err)
		}
		return nil, toStatus(err)
	}

	// One start instant in the coordinator's clock, sent to each agent in
	// its own clock.
	var maxRTT time.Duration
	for _, r := range runs {
		maxRTT = max(maxRTT, r.rtt)
	}
	startAt := time.Now().Add(c.cfg.StartDelay + 2*maxRTT)
	if active.stopRequested() {
		log.Info("run stopped before its start")
		return nil, stoppedBeforeStart()
	}
	for _, r := range runs {
		at := startAt.Add(r.offset).UnixNano()
		if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Start{Start: &pb.Start{StartAtUnixNano: at}}}); err != nil {
			return nil, status.Errorf(codes.Unavailable, "start agent %s: %v", r.meta.GetName(), err)
		}
	}
	log.Info("run started", "agents", len(runs), "connections", p.Connections, "duration", p.Duration)

	events := make(chan event, 16*len(runs))
	for i, r := range runs {
		go func() {
			for {
				msg, err := r.stream.Recv()
				select {
				case events <- event{agent: i, msg: msg, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	limit := p.Duration
	if limit == 0 {
		limit = plan.MaxRunLength // count mode without a duration
	}
	deadline := time.NewTimer(time.Until(startAt.Add(p.Warmup + limit + p.Timeout + 10*time.Second)))
	defer deadline.Stop()

	m := newMerger(p, len(runs))
	pending := len(runs)
	stop := active.stop // nil once handled
	for pending > 0 {
		var ev event
		select {
		case <-stop:
			// StopRun: end every agent's window now. Each still sends its
			// last intervals and Done; one whose stream is broken fails
			// through its Recv as usual.
			stop = nil
			log.Info("stopping the run early: ending every agent's window")
			for _, r := range runs {
				if r.done != nil || r.ended || r.err != nil {
					continue
				}
				if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Stop{Stop: &pb.Stop{}}}); err != nil {
					log.Warn("send stop", "agent", r.meta.GetName(), "err", err)
				}
			}
			continue
		case ev = <-events:
		case <-deadline.C:
			for _, r := range runs {
				if r.done == nil && r.err == nil {
					r.err = errors.New("no result before the run's deadline")
					pending--
				} else if r.done != nil && !r.ended {
					r.ended = true // got its result; its stream just did not close
					pending--
				}
			}
			cancel()
			continue
		case <-ctx.Done():
			return nil, toStatus(ctx.Err())
		}
		r := runs[ev.agent]
		if r.ended || r.err != nil {
			continue // already ended (a late message after the deadline)
		}
		if ev.err != nil && r.done != nil {
			// The stream's end after Done: the agent has released its
			// connections and is free for the next run.
			r.ended = true
			pending--
			continue
		}
		if ev.err != nil {
			if errors.Is(ev.err, io.EOF) {
				ev.err = errors.New("stream ended without a result")
			}
			r.err = fmt.Errorf("agent %s: %w", r.meta.GetName(), ev.err)
			log.Warn("agent failed mid-run; keeping its measurements so far", "agent", r.meta.GetName(), "err", ev.err)
			pending--
			continue
		}
		switch msg := ev.msg.Msg.(type) {
		case *pb.RunResponse_Interval:
			counts, err := wire.CountsFromProto(msg.Interval.GetCounters())
			var pr *pb.Progress
			if err == nil {
				pr, err = m.add(ev.agent, r.cpus, startAt.Add(r.offset+p.Warmup), msg.Interval, &counts)
			}
			if err != nil {
				r.err = fmt.Errorf("agent %s: %w", r.meta.GetName(), err)
				pending--
				continue
			}
			r.counters.Add(&counts)
			r.cpu += msg.Interval.GetCpuTime().AsDuration()
			r.intervals++
			if pr != nil && progress != nil {
				pr.RunId = runID
				progress(pr)
			}
		case *pb.RunResponse_Done:
			r.done = msg.Done
		}
	}
	cancel() // ends every Run stream: agents return to idle
	c.unregister(runID)

	return c.result(runID, p, startAt, runs, m)
}

// selectAgents picks the agents for p: every live agent that no run of this
// coordinator is using, or the first p.Agents of them by name, never more
// than p.Connections. An agent busy with another coordinator's run refuses
// the share (FailedPrecondition), which fails the run before it starts.
func (c *Coordinator) selectAgents(p plan.Plan) ([]*pb.NodeMeta, error) {
	live := c.Agents()
	c.mu.Lock()
	defer c.mu.Unlock()
	var free []*pb.NodeMeta
	for _, m := range live {
		if !c.busy[m.GetName()] {
			free = append(free, m)
		}
	}
	if len(free) == 0 {
		if len(live) > 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "no free agents: all %d live agents are in another run", len(live))
		}
		return nil, fmt.Errorf("%w: start agents with --join %s", errNoAgents, c.GossipAddr())
	}
	n := len(free)
	if p.Agents > 0 {
		if p.Agents > n {
			return nil, status.Errorf(codes.FailedPrecondition, "plan wants %d agents, %d free (of %d live)", p.Agents, n, len(live))
		}
		n = p.Agents
	}
	n = min(n, p.Connections)
	for _, m := range free[:n] {
		c.busy[m.GetName()] = true
	}
	return free[:n], nil
}

// releaseAgents returns agents taken by selectAgents.
func (c *Coordinator) releaseAgents(agents []*pb.NodeMeta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range agents {
		delete(c.busy, m.GetName())
	}
}

// prepare connects to one agent, estimates its clock offset, sends its share
// and waits for Ready. The stream lives on ctx (the run); the waits are
// bounded by prepCtx.
func (c *Coordinator) prepare(ctx, prepCtx context.Context, r *agentRun) error {
	name := r.meta.GetName()
	conn, err := grpc.NewClient(r.meta.GetGrpcAddr(),
		c.dialCreds,
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 2 * time.Second}),
	)
	if err != nil {
		return fmt.Errorf("agent %s at %s: %w", name, r.meta.GetGrpcAddr(), err)
	}
	r.conn = conn
	client := pb.NewAgentServiceClient(conn)
	if r.offset, r.rtt, err = measureClock(prepCtx, client, c.cfg.ClockSamples); err != nil {
		return fmt.Errorf("agent %s clock: %w", name, err)
	}
	r.stream, err = client.Run(ctx)
	if err != nil {
		return fmt.Errorf("agent %s: open run stream: %w", name, err)
	}
	if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Setup{Setup: wire.ShareToProto(r.share)}}); err != nil {
		return fmt.Errorf("agent %s: send share: %w", name, err)
	}
	type recv struct {
		msg *pb.RunResponse
		err error
	}
	ch := make(chan recv, 1)
	go func() {
		msg, err := r.stream.Recv()
		ch <- recv{msg, err}
	}()
	select {
	case <-prepCtx.Done():
		return fmt.Errorf("agent %s: not ready: %w", name, prepCtx.Err())
	case rv := <-ch:
		if rv.err != nil {
			st := status.Convert(rv.err)
			switch st.Code() {
			case codes.InvalidArgument, codes.FailedPrecondition:
				return status.Error(st.Code(), st.Message())
			case codes.Unavailable:
				// The agent could not reach the target (its message names
				// the agent and the cause), or the agent itself vanished.
				return status.Error(codes.FailedPrecondition, st.Message())
			}
			return status.Errorf(codes.Aborted, "agent %s: %s", name, st.Message())
		}
		if r.ready = rv.msg.GetReady(); r.ready == nil {
			return fmt.Errorf("agent %s: expected ready, got %T", name, rv.msg.GetMsg())
		}
		if r.ready.GetUsableCpus() > 0 {
			r.cpus = r.ready.GetUsableCpus()
		}
	}
	return nil
}

// measureClock estimates agent clock minus coordinator clock NTP-style:
// offset = agent time - (send time + RTT/2), keeping the minimum-RTT sample
// of n.
func measureClock(ctx context.Context, client pb.AgentServiceClient, n int) (offset, rtt time.Duration, err error) {
	rtt = -1
	for range n {
		ctx1, cancel := context.WithTimeout(ctx, 2*time.Second)
		t0 := time.Now()
		resp, err := client.Clock(ctx1, &pb.ClockRequest{})
		t1 := time.Now()
		cancel()
		if err != nil {
			return 0, 0, err
		}
		d := t1.Sub(t0)
		if rtt < 0 || d < rtt {
			rtt = d
			mid := t0.Add(d / 2)
			offset = time.Unix(0, resp.GetNowUnixNano()).Sub(mid.Round(0))
		}
	}
	return offset, rtt, nil
}

// result builds the run's merged result.
func (c *Coordinator) result(runID string, p plan.Plan, startAt time.Time, runs []*agentRun, m *merger) (*pb.RunResult, error) {
	res := &pb.RunResult{
		RunId:             runID,
		Plan:              wire.PlanToProto(plan.Redacted(p)), // no secret in what is kept
		StartedAtUnixNano: startAt.UnixNano(),
		Window:            durationpb.New(p.Duration),
	}
	var total, warmup measure.Counts
	// The CA and body are inputs, not results; keep the stored result small.
	res.Plan.Body = nil
	if res.Plan.Tls != nil {
		res.Plan.Tls.CaPem = nil
	}
	hs, err := wire.HistogramsToProto(m.total)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode merged histograms: %v", err)
	}
	res.Histograms = hs
	res.Timeline = m.timeline()
	if res.Stages, err = m.stageResults(); err != nil {
		return nil, status.Errorf(codes.Internal, "encode stage histograms: %v", err)
	}
	if p.Warmup > 0 {
		res.WarmupDuration = durationpb.New(p.Warmup)
	}
	var window time.Duration
	haveWindow := false
	var firstMin, firstMax time.Time
	for _, r := range runs {
		ar := &pb.AgentResult{
			Name:        r.meta.GetName(),
			GrpcAddr:    r.meta.GetGrpcAddr(),
			Connections: int64(r.share.Connections),
			Requests:    r.counters.Requests,
			Errors:      r.counters.ErrorTotal(),
			CpuTime:     durationpb.New(r.cpu),
			Cpus:        r.cpus,
			ClockOffset: durationpb.New(r.offset),
			Rtt:         durationpb.New(r.rtt),
			CpuList:     r.ready.GetCpuList(),
			Missed:      r.counters.Missed,
		}
		total.Add(&r.counters)
		if r.err != nil {
			ar.Error = r.err.Error()
		}
		if d := r.done; d != nil {
			// The agent's window, in its own clock: from its start instant
			// plus the warm-up to its reported end.
			agentWindowStart := startAt.Add(r.offset + p.Warmup)
			if we := d.GetWindowEndUnixNano(); we != 0 {
				window = max(window, time.Unix(0, we).Sub(agentWindowStart))
				haveWindow = true
			}
			if d.GetStopped() {
				res.StoppedEarly = true
			}
			w, err := wire.CountsFromProto(d.GetWarmup())
			if err != nil && ar.Error == "" {
				ar.Error = fmt.Sprintf("agent %s: warm-up %v", r.meta.GetName(), err)
			}
			warmup.Add(&w)
			if ms := d.GetMaxStreams(); ms > 0 && (res.MaxStreams == 0 || ms < res.MaxStreams) {
				res.MaxStreams = ms
			}
			ar.InFlight = d.GetInFlight()
			ar.Issued = d.GetIssued()
			res.InFlight += d.GetInFlight()
			if fs := d.GetFirstSendUnixNano(); fs != 0 {
				first := time.Unix(0, fs).Add(-r.offset) // in the coordinator's clock
				ar.StartOffset = durationpb.New(first.Sub(startAt))
				if firstMin.IsZero() || first.Before(firstMin) {
					firstMin = first
				}
				if first.After(firstMax) {
					firstMax = first
				}
			}
		}
		if r.done == nil {
			// No Done: the agent failed mid-run. Its issued requests are
			// those whose outcome it reported; any still in flight are
			// unknown, and its row says why.
			ar.Issued = r.counters.Ended()
		}
		total.Issued += ar.Issued
		res.Agents = append(res.Agents, ar)
	}
	res.Counters = wire.CountsToProto(&total)
	res.Warmup = wire.CountsToProto(&warmup)
	if !firstMin.IsZero() {
		res.StartSkew = durationpb.New(firstMax.Sub(firstMin))
	}
	if window > 0 || haveWindow && res.StoppedEarly {
		// (A window stopped before anything ended in it is empty.)
		res.Window = durationpb.New(window)
	}
	if res.StoppedEarly {
		// Stages cut by the stop report the part that ran, so that their
		// rates are over the time they had; later stages are empty.
		for _, st := range res.Stages {
			start, d := st.GetStart().AsDuration(), st.GetDuration().AsDuration()
			st.Duration = durationpb.New(min(max(window-start, 0), d))
		}
	}
	// Stage change skew: when each agent began sending on stage i's
	// schedule, in the coordinator's clock.
	for i := 1; i < len(res.Stages); i++ {
		var lo, hi time.Time
		for _, r := range runs {
			ch := r.done.GetStageChangeUnixNano()
			if r.done == nil || i-1 >= len(ch) || ch[i-1] == 0 {
				continue
			}
			at := time.Unix(0, ch[i-1]).Add(-r.offset)
			if lo.IsZero() || at.Before(lo) {
				lo = at
			}
			if at.After(hi) {
				hi = at
			}
		}
		if !lo.IsZero() {
			res.Stages[i].ChangeSkew = durationpb.New(hi.Sub(lo))
		}
	}
	return res, nil
}

// newRunID returns a sortable, unique run ID: UTC time plus 6 random hex
// digits, e.g. 20261130T085012Z-3fa9c1.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// merger merges interval histograms exactly: per interval across agents
// (progress and the timeline), per stage, and over the whole window.
type merger struct {
	p       plan.Plan
	agents  int
	dec     hist.Decoder
	sparse  [hist.NumKinds]hist.Sparse
	total   *hist.Set
	byIndex map[int32]*pending
	points  map[int32]*pb.TimelinePoint
	stages  []*stageAcc
}

type pending struct {
	latency  *hist.Histogram
	requests int64
	errors   int64
	missed   int64
	start    time.Duration
	length   time.Duration
	cpuBusy  []float64
	seen     int
}

type stageAcc struct {
	res     *pb.StageResult
	counts  measure.Counts
	latency *hist.Histogram
	start   time.Duration
	end     time.Duration
}

func newMerger(p plan.Plan, agents int) *merger {
	m := &merger{p: p, agents: agents, total: hist.NewSet(), byIndex: map[int32]*pending{}, points: map[int32]*pb.TimelinePoint{}}
	var at time.Duration
	prev := int64(p.Connections)
	if p.OpenLoop() {
		prev = p.Rate
	}
	for i, st := range p.Stages {
		to := int64(st.Connections)
		if p.OpenLoop() {
			to = st.Rate
		}
		m.stages = append(m.stages, &stageAcc{
			res:     &pb.StageResult{Index: int32(i), Start: durationpb.New(at), Duration: durationpb.New(st.Duration), TargetFrom: prev, TargetTo: to},
			latency: hist.New(), start: at, end: at + st.Duration,
		})
		prev = to
		at += st.Duration
	}
	return m
}

// add merges interval iv of agent a (whose clock is offset from the
// coordinator's, and whose window starts at windowStart in its own clock);
// it returns the merged progress once every agent has sent interval k. It
// rejects a corrupt histogram, or a latency histogram whose sample count
// disagrees with the interval's counters.
func (m *merger) add(a int, cpus int32, windowStart time.Time, iv *pb.Interval, counts *measure.Counts) (*pb.Progress, error) {
	// Decode to sparse (value, count) form and add that: the cost follows
	// the histograms' non-empty buckets, not their size.
	hs := iv.GetHistograms()
	for k := range hist.NumKinds {
		if err := m.dec.Decode(wire.HistogramBytes(hs, k), &m.sparse[k]); err != nil {
			return nil, fmt.Errorf("interval %d %s histogram: %w", iv.GetIndex(), k, err)
		}
	}
	latency := &m.sparse[hist.Latency]
	if latency.Total != counts.Requests {
		return nil, fmt.Errorf("interval %d: latency histogram holds %d samples, counters say %d requests", iv.GetIndex(), latency.Total, counts.Requests)
	}
	for k := range hist.NumKinds {
		if err := m.total.Get(k).AddSparse(&m.sparse[k]); err != nil {
			return nil, err
		}
	}
	start := time.Unix(0, iv.GetStartUnixNano()).Sub(windowStart)
	length := time.Duration(iv.GetEndUnixNano() - iv.GetStartUnixNano())
	for _, st := range m.stages {
		if start >= st.start && start < st.end {
			st.counts.Add(counts)
			if err := st.latency.AddSparse(latency); err != nil {
				return nil, err
			}
		}
	}
	p := m.byIndex[iv.GetIndex()]
	if p == nil {
		p = &pending{latency: hist.New(), start: start, length: length, cpuBusy: make([]float64, m.agents)}
		m.byIndex[iv.GetIndex()] = p
	}
	if err := p.latency.AddSparse(latency); err != nil {
		return nil, err
	}
	p.requests += counts.Requests
	p.errors += counts.ErrorTotal()
	p.missed += counts.Missed
	p.length = max(p.length, length)
	if cpus > 0 && length > 0 {
		p.cpuBusy[a] = iv.GetCpuTime().AsDuration().Seconds() / (length.Seconds() * float64(cpus))
	}
	p.seen++
	if p.seen < m.agents {
		return nil, nil
	}
	pt := m.finish(iv.GetIndex())
	return &pb.Progress{Index: pt.Index, Requests: pt.Requests, Errors: pt.Errors, P99Us: pt.P99Us, Interval: pt.Length}, nil
}

// finish turns interval k's pending merge into its timeline point.
func (m *merger) finish(k int32) *pb.TimelinePoint {
	p := m.byIndex[k]
	delete(m.byIndex, k)
	pt := &pb.TimelinePoint{
		Index: k, Start: durationpb.New(p.start), Length: durationpb.New(p.length),
		Requests: p.requests, Errors: p.errors, Missed: p.missed, CpuBusy: p.cpuBusy,
	}
	if p.latency.Count() > 0 {
		pt.P50Us = p.latency.ValueAtPercentile(50)
		pt.P90Us = p.latency.ValueAtPercentile(90)
		pt.P99Us = p.latency.ValueAtPercentile(99)
		pt.MaxUs = p.latency.Max()
	}
	if m.p.OpenLoop() {
		pt.TargetRps = m.targetAt(p.start + p.length/2)
	}
	m.points[k] = pt
	return pt
}

// targetAt returns the plan's target rate at offset t of the window.
func (m *merger) targetAt(t time.Duration) float64 {
	for _, st := range m.stages {
		if t < st.end {
			f := float64(t-st.start) / float64(st.end-st.start)
			return float64(st.res.TargetFrom) + f*float64(st.res.TargetTo-st.res.TargetFrom)
		}
	}
	if n := len(m.stages); n > 0 {
		return float64(m.stages[n-1].res.TargetTo)
	}
	return float64(m.p.Rate)
}

// timeline finishes intervals some agent never sent (it failed) and returns
// every point in order.
func (m *merger) timeline() []*pb.TimelinePoint {
	for k := range m.byIndex {
		m.finish(k)
	}
	out := make([]*pb.TimelinePoint, 0, len(m.points))
	for _, pt := range m.points {
		out = append(out, pt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// stageResults returns the stages with their merged latency.
func (m *merger) stageResults() ([]*pb.StageResult, error) {
	var out []*pb.StageResult
	for _, st := range m.stages {
		b, err := st.latency.Encode()
		if err != nil {
			return nil, err
		}
		st.res.Latency = b
		st.res.Counters = wire.CountsToProto(&st.counts)
		out = append(out, st.res)
	}
	return out, nil
}

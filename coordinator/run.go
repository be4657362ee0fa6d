package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/metrics"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/threshold"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// agentRun is one agent's part of a run, as the coordinator tracks it.
type agentRun struct {
	meta   *pb.NodeMeta
	share  plan.Share
	conn   *grpc.ClientConn
	stream pb.AgentService_RunClient

	offset, rtt time.Duration // agent clock - coordinator clock; RTT of that sample
	ready       *pb.Ready

	// cancelStream ends this agent's Run stream alone (the agent stops its
	// load at once): the run loop calls it when it gives the agent up.
	cancelStream context.CancelFunc

	// Written by the run loop only.
	counters  measure.Counts
	cpu       time.Duration
	cpuWait   time.Duration // run-queue delay, summed over intervals
	cpus      int32
	intervals int
	// intervalRPS is its completed responses per second in each interval
	// received, in order (wrk's per-thread Req/Sec samples; addRateSample);
	// lastReqs and lastLen are the last sample's responses and length.
	intervalRPS []float64
	lastReqs    int64
	lastLen     time.Duration
	done        *pb.Done
	ended       bool // the stream ended after Done
	err         error
	// lastMsg is when its last message came (coordinator clock), from the
	// start on; next is the index of the interval it sends next.
	lastMsg time.Time
	next    int
	// lastEnd is the end of its last interval received, from its window's
	// start: how long its load ran, as far as the result holds it.
	lastEnd time.Duration
	// firstSend is the earliest first send its intervals gave (agent
	// clock, unix ns; 0: none yet), its start when it is lost before Done.
	firstSend int64
	// lost is set when the run gave the agent up after the start (err says
	// how); lostAt is when, from the window's start.
	lost   bool
	lostAt time.Duration
	// kept are its intervals as merged, when the run keeps them
	// (run.keepIntervals).
	kept []*pb.AgentInterval
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
	// agents (the agents not lost).
	Progress func(*pb.Progress)
	// Lost is called when the run loses an agent after its start, before
	// the policy's stop goes out.
	Lost func(*pb.AgentLost)
	// AgentIntervals, not a callback, asks for every agent's intervals in
	// the result (AgentResult.Intervals, RunPlanRequest.agent_intervals).
	AgentIntervals bool
}

// RunPlan executes p and returns its merged result. progress, if not nil, is
// called after each interval has been merged across agents. It is
// RunPlanWith with only a Progress hook.
func (c *Coordinator) RunPlan(ctx context.Context, p plan.Plan, progress func(*pb.Progress)) (*pb.RunResult, error) {
	return c.RunPlanWith(ctx, p, RunHooks{Progress: progress})
}

// RunPlanWith executes p and returns its merged result, calling hooks as
// the run goes: Execute with no options.
func (c *Coordinator) RunPlanWith(ctx context.Context, p plan.Plan, hooks RunHooks) (*pb.RunResult, error) {
	return c.Execute(ctx, p, RunOptions{}, hooks)
}

// Execute executes p with options o and returns its merged result,
// calling hooks as the run goes. When the run loses an agent after the
// start (its stream ends before its Done, or it is silent past the bound
// of SilenceIntervals and SilenceGrace), the result keeps everything the
// agent sent, names the loss in its row (AgentResult.Lost, LostAt, Error)
// and is marked RunResult.Partial; with p.OnAgentLoss abort every other
// agent's window ends at once (RunResult.Aborted), with continue they run
// on. Execute then returns the result and a nil error. StopRun ends the
// window early: the result then covers the shortened window
// (RunResult.StoppedEarly); so does a threshold's abort (o.AbortOnFail:
// RunResult.AbortedByThreshold). The result holds each threshold's
// outcome. With a run store (Config.DataDir) the run is stored from its
// acceptance on, each merged interval as it comes, and its end. Errors
// before the start (bad plan or threshold: InvalidArgument; no agents, an
// agent that cannot reach the target, StopRun while the agents prepare:
// Canceled) return a nil result and a gRPC status error.
func (c *Coordinator) Execute(ctx context.Context, p plan.Plan, o RunOptions, hooks RunHooks) (res *pb.RunResult, err error) {
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		c.logRefused(p, toStatus(err))
		return nil, toStatus(err)
	}
	ths, err := threshold.ParseAll(o.Thresholds)
	if err == nil {
		err = threshold.CheckStages(ths, len(p.Stages))
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "thresholds: "+err.Error())
	}
	if o.AbortOnFail && len(ths) == 0 {
		return nil, status.Error(codes.InvalidArgument, "abort_on_fail: no threshold to abort on (give one or more thresholds)")
	}
	o.setDefaults()
	agents, err := c.selectAgents(p)
	if err != nil {
		c.logRefused(p, toStatus(err))
		return nil, toStatus(err)
	}
	defer c.releaseAgents(agents)
	rn := c.newRun(ctx, p, agents)
	rn.keepIntervals = hooks.AgentIntervals
	rn.opts, rn.thresholds = o, ths
	rn.rec = c.startRecord(&pb.StoredRun{
		RunId: rn.id, Plan: storedPlan(p), AcceptedAtUnixNano: time.Now().UnixNano(), Tags: o.Tags, Note: o.Note,
		SearchId: o.SearchID, Agents: agents, State: pb.RunState_RUN_STATE_RUNNING, Thresholds: o.Thresholds,
		Coordinator: c.cfg.Name,
	}, rn.log)
	defer c.unregister(rn.id)
	defer rn.close()
	rn.logStart()
	began := time.Now()
	defer func() { rn.logEnd(res, err, began) }()
	rn.startMetrics()
	defer func() { rn.endMetrics(res, err) }()
	if hooks.Accepted != nil {
		hooks.Accepted(&pb.RunAccepted{RunId: rn.id, Agents: int32(len(agents))})
	}
	res, err = rn.execute(hooks)
	if err != nil {
		rn.rec.end(pb.RunState_RUN_STATE_FAILED, nil, err)
		return nil, err
	}
	rn.rec.end(pb.RunState_RUN_STATE_FINISHED, res, nil)
	return res, nil
}

// execute prepares, starts and runs rn, and returns its result.
func (rn *run) execute(hooks RunHooks) (*pb.RunResult, error) {
	if err := rn.prepare(); err != nil {
		return nil, err
	}
	if err := rn.start(); err != nil {
		return nil, err
	}
	if err := rn.loop(hooks); err != nil {
		return nil, err
	}
	rn.cancel() // ends every Run stream: agents return to idle
	rn.c.unregister(rn.id)
	return rn.result()
}

// run is one run in progress: its agents, its merge, and the owner of
// every goroutine it starts (the Ready receivers and the receive pumps),
// which close joins.
type run struct {
	c      *Coordinator
	id     string
	p      plan.Plan
	log    *slog.Logger
	active *activeRun
	agents []*agentRun
	m      *merge.Merger
	// metrics are the run's series on /metrics (nil without them).
	metrics *metrics.Run

	// ctx is the run's: cancel ends every agent's Run stream.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	startAt time.Time // the start instant, coordinator clock (set by start)

	// keepIntervals: each agent's intervals go into its result row
	// (RunHooks.AgentIntervals).
	keepIntervals bool
	opts          RunOptions
	thresholds    []threshold.Threshold
	rec           *recorder // the run store's writer; nil without a store

	// Written by the run loop only.
	userStop  bool           // StopRun ended the window
	abort     abortState     // --abort-on-fail
	aborted   bool           // on_agent_loss abort ended the window at a loss
	stalled   time.Duration  // the coordinator's own stalls, summed
	stall     time.Duration  // the longest of them
	lastStall time.Duration  // the last of them
	stallEnd  time.Time      // when the last one ended
	ivCounts  measure.Counts // the interval being merged's counters (handle)
	// silentAfter is when the next agent may be overdue (watchSilence):
	// no scan before it can find one.
	silentAfter time.Time
}

// windowStart returns the window's start instant, coordinator clock.
func (rn *run) windowStart() time.Time { return rn.startAt.Add(rn.p.Warmup) }

// newRun registers a run of p over agents for StopRun and splits p into
// their shares.
func (c *Coordinator) newRun(ctx context.Context, p plan.Plan, agents []*pb.NodeMeta) *run {
	id := newRunID()
	rn := &run{c: c, id: id, p: p, log: c.log.With("run_id", id), m: merge.New(p, len(agents))}
	rn.ctx, rn.cancel = context.WithCancel(ctx)
	shares := plan.Shares(id, p, len(agents))
	rn.agents = make([]*agentRun, len(agents))
	for i, m := range agents {
		rn.agents[i] = &agentRun{meta: m, share: shares[i], cpus: m.GetCpus()}
	}
	rn.active = c.register(id)
	return rn
}

// spawn runs f on a goroutine that close joins; f must return once the
// run's context ends.
func (rn *run) spawn(f func()) {
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		f()
	}()
}

// close ends the run's streams, closes its agent connections and joins
// its goroutines.
func (rn *run) close() {
	rn.cancel()
	for _, r := range rn.agents {
		if r.conn != nil {
			r.conn.Close()
		}
	}
	rn.wg.Wait()
}

// addRateSample appends to r.intervalRPS the rate of an interval of n
// responses over l. An interval shorter than a whole one (interval: the
// last of a window that count mode or a stop ended early) is folded into
// the sample before it, so that every sample covers at least a whole
// interval, as wrk's do, and an agent's samples span its own window, as
// its row's rate does: a short tail never stands as a sample of its own.
func (r *agentRun) addRateSample(n int64, l, interval time.Duration) {
	if l < interval && len(r.intervalRPS) > 0 {
		n, l = n+r.lastReqs, l+r.lastLen
		r.intervalRPS = r.intervalRPS[:len(r.intervalRPS)-1]
	}
	r.intervalRPS = append(r.intervalRPS, float64(n)/l.Seconds())
	r.lastReqs, r.lastLen = n, l
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

var errNoAgents = errors.New("no agents alive")

// agentWindow is the gRPC flow-control window of each agent's connection
// and stream (grpc-go's minimum, 64 KiB): an agent sends about 5 KB per
// interval, so this holds a dozen intervals, and a fixed window turns off
// grpc-go's bandwidth-delay estimation (a ping per data burst).
const agentWindow = 64 << 10

// selectAgents picks the agents for p: every live agent that no run of this
// coordinator is using (and whose gossiped gRPC security matches the
// coordinator's: the others are skipped with a WARN, and when no agent is
// left the error names them and why), or the first p.Agents of them by name, never more
// than p.Connections. An agent busy with another coordinator's run refuses
// the share (FailedPrecondition), which fails the run before it starts.
func (c *Coordinator) selectAgents(p plan.Plan) ([]*pb.NodeMeta, error) {
	var live []*pb.NodeMeta
	var refused []string
	for _, m := range c.Agents() {
		if reason := c.securityMismatch(m); reason != "" {
			c.log.Warn("agent not used for the run: "+reason, "agent", m.GetName(), "grpc", m.GetGrpcAddr())
			refused = append(refused, fmt.Sprintf("agent %s at %s: %s", m.GetName(), m.GetGrpcAddr(), reason))
			continue
		}
		live = append(live, m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var free []*pb.NodeMeta
	for _, m := range live {
		if !c.busy[m.GetName()] {
			free = append(free, m)
		}
	}
	if len(live) == 0 && len(refused) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "no usable agents: %s", strings.Join(refused, "; "))
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
			return nil, status.Errorf(codes.FailedPrecondition, "plan wants %d agents, %d free (of %d live)%s", p.Agents, n, len(live), refusedText(refused))
		}
		n = p.Agents
	}
	n = min(n, p.Connections)
	for _, m := range free[:n] {
		c.busy[m.GetName()] = true
	}
	return free[:n], nil
}

// refusedText is what a shortage of agents adds about the agents
// selectAgents did not use: "" when none.
func refusedText(refused []string) string {
	if len(refused) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d not usable: %s", len(refused), strings.Join(refused, "; "))
}

// releaseAgents returns agents taken by selectAgents.
func (c *Coordinator) releaseAgents(agents []*pb.NodeMeta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range agents {
		delete(c.busy, m.GetName())
	}
}

// prepare connects to every agent, syncs its clock, sends its share and
// waits for its Accepted; only when every agent has accepted (none refused
// its share: a target outside its allowlist, a cap, a bad share) does it
// send each Connect and wait for its Ready, so a refused share means no
// agent of the run sent the target anything. Both phases run all agents in
// parallel, bounded together by prepareBudget (PrepareTimeout plus an
// allowance per agent and per connection): the barrier before the start. A StopRun meanwhile abandons the preparation at once (Canceled).
// Errors: gRPC status errors (PermissionDenied from an agent that refused
// its share, DeadlineExceeded when the agents were not ready in time).
func (rn *run) prepare() error {
	c := rn.c
	budget := rn.prepareBudget()
	prepCtx, prepCancel := context.WithTimeout(rn.ctx, budget)
	defer prepCancel()
	// A stop while the agents prepare abandons the preparation at once.
	// The watcher ends with the preparation; stopWatch joins it.
	prepared := make(chan struct{})
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		select {
		case <-rn.active.stop:
			prepCancel()
		case <-prepared:
		}
	}()
	err := rn.eachAgent(prepCtx, rn.acceptAgent)
	if err == nil {
		err = rn.eachAgent(prepCtx, rn.connectAgent)
	}
	close(prepared)
	<-watcher
	if rn.active.stopRequested() {
		rn.log.Info("run stopped before its start")
		return rn.stoppedBeforeStart()
	}
	if err != nil {
		if prepCtx.Err() != nil && rn.ctx.Err() == nil {
			return status.Errorf(codes.DeadlineExceeded, "agents not ready within %v (--prepare-timeout %v + %v per agent + %v per connection of the largest share): %s",
				budget, c.cfg.PrepareTimeout, preparePerAgent, preparePerConnection, status.Convert(toStatus(err)).Message())
		}
		// An agent's Unavailable is never the run's: coordctl takes it for
		// its coordinator being gone.
		if st := status.Convert(toStatus(err)); st.Code() == codes.Unavailable {
			return status.Error(codes.Aborted, st.Message())
		}
		return toStatus(err)
	}
	return nil
}

// preparePerAgent and preparePerConnection scale the preparation's
// deadline with the run: the coordinator contacts prepareParallel agents
// at a time (clock samples, share, Accepted, Ready), and an agent opens
// its share's connections before its Ready. Measured: 1,000 simulated
// agents prepared in 1.4-5 s on the shared 2-core VM at load average
// 19-28 (BenchmarkCoordinatorAgents), so 5 ms per agent leaves about 5
// times that.
const (
	preparePerAgent      = 5 * time.Millisecond
	preparePerConnection = time.Millisecond
)

// prepareBudget is the preparation's deadline: PrepareTimeout, plus
// preparePerAgent per agent of the run, plus preparePerConnection per
// connection of its largest share (100 agents of 100 connections with the
// default 30 s: 30.6 s; 10,000 agents: 80 s; one agent of 100,000
// connections: 130 s).
func (rn *run) prepareBudget() time.Duration {
	largest := 0
	for _, r := range rn.agents {
		largest = max(largest, r.share.Connections)
	}
	return rn.c.cfg.PrepareTimeout + time.Duration(len(rn.agents))*preparePerAgent + time.Duration(largest)*preparePerConnection
}

// prepareParallel bounds how many agents eachAgent contacts at once: all
// of 10,000 at once (a dial, a handshake and clock samples each) missed
// the clock samples' 2-s deadline on a 2-core coordinator
// (BenchmarkCoordinatorAgents); 256 at a time prepared them in seconds.
const prepareParallel = 256

// eachAgent runs f for every agent, up to prepareParallel at a time, and
// joins their errors.
func (rn *run) eachAgent(ctx context.Context, f func(context.Context, *agentRun) error) error {
	errs := make([]error, len(rn.agents))
	sem := make(chan struct{}, prepareParallel)
	var wg sync.WaitGroup
	for i, r := range rn.agents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(ctx, r)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stoppedBeforeStart is the error of a run stopped while its agents
// prepared.
func (rn *run) stoppedBeforeStart() error {
	return status.Errorf(codes.Canceled, "run %s stopped before its start: nothing was measured", rn.id)
}

// start picks one start instant in the coordinator's clock (StartDelay
// plus twice the largest RTT ahead) and sends it to each agent in its own
// clock. Errors: Canceled after a StopRun, Aborted when an agent's stream
// is broken.
func (rn *run) start() error {
	var maxRTT time.Duration
	for _, r := range rn.agents {
		maxRTT = max(maxRTT, r.rtt)
	}
	rn.startAt = time.Now().Add(rn.c.cfg.StartDelay + 2*maxRTT)
	if rn.active.stopRequested() {
		rn.log.Info("run stopped before its start")
		return rn.stoppedBeforeStart()
	}
	for _, r := range rn.agents {
		r.lastMsg = time.Now()
		at := rn.startAt.Add(r.offset).UnixNano()
		if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Start{Start: &pb.Start{StartAtUnixNano: at}}}); err != nil {
			// Aborted, not Unavailable: coordctl takes Unavailable for
			// its coordinator being gone.
			return status.Errorf(codes.Aborted, "start agent %s: %v", r.meta.GetName(), err)
		}
	}
	rn.log.Info("run started", "agents", len(rn.agents), "connections", rn.p.Connections, "duration", rn.p.Duration)
	if rn.c.insecureWarning != "" {
		rn.log.Warn(rn.c.insecureWarning)
	}
	return nil
}

// acceptAgent connects to one agent, estimates its clock offset, sends its
// share and waits for Accepted. The stream lives on rn.ctx (the run); the
// waits are bounded by prepCtx.
func (rn *run) acceptAgent(prepCtx context.Context, r *agentRun) error {
	c := rn.c
	name := r.meta.GetName()
	conn, err := grpc.NewClient(r.meta.GetGrpcAddr(),
		c.dialCreds,
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 2 * time.Second}),
		// Fixed flow-control windows: no BDP estimation, whose pings
		// and window updates were a write per agent per interval.
		grpc.WithInitialWindowSize(agentWindow), grpc.WithInitialConnWindowSize(agentWindow),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newAgentCodec())),
	)
	if err != nil {
		return fmt.Errorf("agent %s at %s: %w", name, r.meta.GetGrpcAddr(), err)
	}
	r.conn = conn
	client := pb.NewAgentServiceClient(conn)
	if r.offset, r.rtt, err = measureClock(prepCtx, client, c.cfg.ClockSamples); err != nil {
		if prepCtx.Err() != nil {
			return fmt.Errorf("agent %s clock: %w", name, err)
		}
		return rn.unreachableAgent(r.meta, err)
	}
	streamCtx, cancelStream := context.WithCancel(rn.ctx)
	r.cancelStream = cancelStream
	r.stream, err = client.Run(streamCtx)
	if err != nil {
		return fmt.Errorf("agent %s: open run stream: %w", name, err)
	}
	if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Setup{Setup: wire.ShareToProto(r.share)}}); err != nil {
		return fmt.Errorf("agent %s: send share: %w", name, err)
	}
	msg, err := rn.recvPrepare(prepCtx, r, "share not accepted")
	if err != nil {
		return err
	}
	if msg.GetAccepted() == nil {
		return fmt.Errorf("agent %s: expected accepted, got %T", name, msg.GetMsg())
	}
	rn.log.Debug("share accepted", "agent", name, "dial_addr", msg.GetAccepted().GetDialAddr())
	return nil
}

// unreachableAgent is the error of an agent whose first call (Clock) at
// prepare failed: FailedPrecondition, not the call's own Unavailable, which
// coordctl takes for its coordinator being gone. Its message names the
// agent, its gRPC address, the cause and, for the causes a user can fix (a
// TLS mismatch, a refused connection), what to do; the coordinator logs the
// same as a WARN.
func (rn *run) unreachableAgent(m *pb.NodeMeta, err error) error {
	cause := status.Convert(err).Message()
	msg := fmt.Sprintf("agent %s at %s unreachable: %s", m.GetName(), m.GetGrpcAddr(), cause)
	hint := unreachableHint(cause)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	rn.log.Warn("agent unreachable", "agent", m.GetName(), "grpc", m.GetGrpcAddr(), "err", cause, "hint", hint)
	return status.Error(codes.FailedPrecondition, msg)
}

// unreachableHint says what a dial error to an agent means, from the text
// of the errors of crypto/tls, crypto/x509 and the kernel; "" when none
// of them.
func unreachableHint(cause string) string {
	switch {
	case strings.Contains(cause, "first record does not look like a TLS handshake"):
		return "it does not speak TLS: started without --tls-*?"
	case strings.Contains(cause, "server preface"), strings.Contains(cause, "connection reset by peer"):
		return "it closed the connection: an agent with mutual TLS and a coordinator without --tls-*?"
	case strings.Contains(cause, "certificate signed by unknown authority"):
		return "its certificate is not signed by the coordinator's --tls-ca"
	case strings.Contains(cause, "certificate is valid for"):
		return "the process there is not an agent, or its certificate is not an agent's"
	case strings.Contains(cause, "connection refused"):
		return "nothing listens there: the agent stopped (or was killed) and gossip has not marked it dead yet; retry in a few seconds"
	}
	return ""
}

// connectAgent tells one agent that accepted its share to open its
// connections, and waits for its Ready.
func (rn *run) connectAgent(prepCtx context.Context, r *agentRun) error {
	name := r.meta.GetName()
	if err := r.stream.Send(&pb.RunRequest{Msg: &pb.RunRequest_Connect{Connect: &pb.Connect{}}}); err != nil {
		return fmt.Errorf("agent %s: send connect: %w", name, err)
	}
	msg, err := rn.recvPrepare(prepCtx, r, "not ready")
	if err != nil {
		return err
	}
	if r.ready = msg.GetReady(); r.ready == nil {
		return fmt.Errorf("agent %s: expected ready, got %T", name, msg.GetMsg())
	}
	if r.ready.GetUsableCpus() > 0 {
		r.cpus = r.ready.GetUsableCpus()
	}
	return nil
}

// recvPrepare receives agent r's next message during the preparation,
// bounded by prepCtx (waiting says for what, in the error). An error the
// agent ended its stream with keeps its code when it is the share's fault
// (InvalidArgument, FailedPrecondition, PermissionDenied).
func (rn *run) recvPrepare(prepCtx context.Context, r *agentRun, waiting string) (*pb.RunResponse, error) {
	name := r.meta.GetName()
	type recv struct {
		msg *pb.RunResponse
		err error
	}
	ch := make(chan recv, 1)
	rn.spawn(func() { // ends with the stream: at the message, or when the run ends
		msg, err := r.stream.Recv()
		ch <- recv{msg, err}
	})
	select {
	case <-prepCtx.Done():
		return nil, fmt.Errorf("agent %s: %s: %w", name, waiting, prepCtx.Err())
	case rv := <-ch:
		if rv.err == nil {
			return rv.msg, nil
		}
		st := status.Convert(rv.err)
		switch st.Code() {
		case codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied:
			return nil, status.Error(st.Code(), st.Message())
		case codes.Unavailable:
			// The agent could not reach the target (its message names
			// the agent and the cause), or the agent itself vanished.
			return nil, status.Error(codes.FailedPrecondition, st.Message())
		}
		return nil, status.Errorf(codes.Aborted, "agent %s: %s", name, st.Message())
	}
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

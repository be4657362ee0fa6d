package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/security"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// coordinatorFlags are coordctl's global flags that say how to reach the
// coordinator: its address and the mutual-TLS files.
type coordinatorFlags struct {
	addr string         // --coordinator
	tls  security.Files // --tls-ca, --tls-cert, --tls-key
}

// dial returns a client of the coordinator, with mutual TLS as a client
// when the TLS flags are set (all three or none: a bad set is a usage
// error). The connection is lazy; errors surface on the first call.
func (co *coordinatorFlags) dial() (pb.CoordinatorServiceClient, func(), error) {
	sec, err := security.LoadFiles(security.RoleClient, co.tls)
	if err != nil {
		return nil, nil, &usageError{err}
	}
	creds, err := sec.DialOption()
	if err != nil {
		return nil, nil, err
	}
	addr := co.addr
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		// gRPC would take "nonsense" for a name to resolve, and fail on
		// the first call with its resolver's words.
		return nil, nil, &usageError{fmt.Errorf("--coordinator %q: want HOST:PORT, e.g. %s", addr, coordinator.DefaultGRPCAddr)}
	}
	explain := func(err error) error { return co.explain(notCoordinator(addr, err)) }
	conn, err := grpc.NewClient(addr, creds,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResultBytes)),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return explain(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, explain(err)
			}
			return explainingStream{cs, explain}, nil
		}))
	if err != nil {
		return nil, nil, fmt.Errorf("coordinator address %q: %w", addr, err)
	}
	return pb.NewCoordinatorServiceClient(conn), func() { conn.Close() }, nil
}

// notCoordinator turns gRPC's "unknown service" answer (the address
// serves gRPC but not the coordinator's service: most often an agent's
// --grpc-addr) into an error that says so; other errors pass unchanged.
func notCoordinator(addr string, err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "unknown service") {
		return status.Errorf(codes.Unimplemented, "%s is not a Phalanx coordinator (%s): is it an agent's --grpc-addr? --coordinator takes the coordinator's --grpc-addr", addr, st.Message())
	}
	return err
}

// explain turns the transport errors of a dial that reached something at
// --coordinator but failed its TLS handshake into an Unauthenticated error
// that says what happened and what to do, from the text of grpc-go's,
// crypto/tls's and crypto/x509's errors: a coordinator that wants mutual TLS
// dialed without the TLS flags (it closes the connection before gRPC's
// preface), one that serves plaintext dialed with them, a certificate not
// signed by --tls-ca, and a server whose certificate is another role's
// (most often an agent's --grpc-addr). Other errors pass unchanged; they
// stay Unavailable, which after a run's start means the coordinator is
// lost.
func (co *coordinatorFlags) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return err
	}
	msg, addr := st.Message(), co.addr
	tlsFlags := fmt.Sprintf("--%s/--%s/--%s or PHALANX_TLS_CA/PHALANX_TLS_CERT/PHALANX_TLS_KEY", security.FlagCA, security.FlagCert, security.FlagKey)
	var what string
	switch {
	case co.tls.CA == "" && strings.Contains(msg, "server preface"):
		what = fmt.Sprintf("reached %s but the TLS handshake failed: the coordinator wants mutual TLS; give %s", addr, tlsFlags)
	case co.tls.CA != "" && strings.Contains(msg, "first record does not look like a TLS handshake"):
		what = fmt.Sprintf("reached %s but it does not speak TLS: the coordinator runs without --tls-*; drop %s (or start it with them)", addr, tlsFlags)
	case strings.Contains(msg, "certificate signed by unknown authority"):
		what = fmt.Sprintf("reached %s but the coordinator's certificate is not signed by --%s %s: give the CA that signed the cluster's certificates", addr, security.FlagCA, co.tls.CA)
	case strings.Contains(msg, "certificate is valid for "+security.RoleAgent.DNSName()):
		what = fmt.Sprintf("%s is an agent (its certificate is for %s), not the coordinator: --coordinator takes the coordinator's --grpc-addr", addr, security.RoleAgent.DNSName())
	case strings.Contains(msg, "certificate is valid for"):
		what = fmt.Sprintf("reached %s but its certificate is not a coordinator's (%s): --coordinator takes the coordinator's --grpc-addr", addr, security.RoleCoordinator.DNSName())
	default:
		return err
	}
	return status.Errorf(codes.Unauthenticated, "%s (%s)", what, msg)
}

// explainingStream applies explain (and notCoordinator) to a stream's
// receive errors: a server-streaming call learns of the unknown service,
// or of a failed handshake, on its first Recv.
type explainingStream struct {
	grpc.ClientStream
	explain func(error) error
}

func (s explainingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil || err == io.EOF {
		return err
	}
	return s.explain(err)
}

// maxResultBytes bounds a message coordctl accepts from the coordinator
// (every call: RunPlan, GetRun, ...): a result holds
// a histogram per interval (and per agent with agent intervals), beyond
// gRPC's default 4 MiB after about half an hour of 1-s intervals.
const maxResultBytes = 1 << 30

// submit runs req's plan on the coordinator, showing progress and losses on view,
// and returns the result. runID, if not nil, is given the
// run's ID as soon as the coordinator sends it (RunAccepted, else each
// Progress); rc, if not nil, keeps what was received. Errors: a
// *lostCoordinator when the coordinator's stream broke after the run was
// accepted (rc then holds every interval received).
func submit(ctx context.Context, client pb.CoordinatorServiceClient, addr string, req *pb.RunPlanRequest, view *progressView, runID func(string), rc *received) (*pb.RunResult, error) {
	p := req.GetPlan()
	if runID == nil {
		runID = func(string) {}
	}
	if rc == nil {
		rc = &received{}
	}
	stream, err := client.RunPlan(ctx, req)
	if err != nil {
		return nil, &prefixedError{"coordinator " + addr + " unreachable", err}
	}
	started := false
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("coordinator %s ended the run without a result", addr)
		}
		if err != nil {
			// Unavailable is the transport's: the coordinator is gone (or
			// unreachable). Any other status is the coordinator's answer.
			if started && ctx.Err() == nil && status.Code(err) == codes.Unavailable {
				return nil, &lostCoordinator{&prefixedError{"lost the coordinator " + addr + " during the run", err}}
			}
			if started {
				return nil, &prefixedError{"the run failed", err} // the coordinator's answer names the cause
			}
			return nil, &prefixedError{"coordinator " + addr + " unreachable", err}
		}
		started = true
		switch m := msg.Msg.(type) {
		case *pb.RunPlanResponse_Accepted:
			rc.accepted(m.Accepted)
			view.accepted(m.Accepted)
			runID(m.Accepted.GetRunId())
		case *pb.RunPlanResponse_Progress:
			rc.progress(m.Progress)
			runID(m.Progress.GetRunId())
			view.interval(m.Progress)
		case *pb.RunPlanResponse_AgentLost:
			rc.lost = append(rc.lost, m.AgentLost)
			printLoss(view, m.AgentLost, p.GetOnAgentLoss())
		case *pb.RunPlanResponse_Result:
			return m.Result, nil
		}
	}
}

// printLoss prints one line when the run loses an agent: when, how, and
// what the plan's policy does.
func printLoss(w io.Writer, l *pb.AgentLost, policy pb.AgentLossPolicy) {
	then := ""
	switch {
	case l.GetAborting():
		then = "; stopping the other agents (--on-agent-loss abort)"
	case policy == pb.AgentLossPolicy_AGENT_LOSS_POLICY_CONTINUE:
		then = "; the other agents run on (--on-agent-loss continue)"
	}
	how := strings.TrimPrefix(l.GetError(), "agent "+l.GetAgent()+": ")
	fmt.Fprintf(w, "coordctl: lost agent %s after %.2fs: %s%s\n", l.GetAgent(), l.GetAt().AsDuration().Seconds(), how, then)
}

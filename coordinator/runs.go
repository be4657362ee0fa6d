package coordinator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanxload/phalanx/internal/store"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Store returns the coordinator's run store, nil without one
// (Config.DataDir).
func (c *Coordinator) Store() *store.Store { return c.store }

// storeOr returns the run store, or FailedPrecondition without one.
func (s *service) storeOr() (*store.Store, error) {
	if s.c.store == nil {
		return nil, status.Error(codes.FailedPrecondition, "this coordinator keeps no run store (started with --data-dir ''): no runs are stored")
	}
	return s.c.store, nil
}

// storeStatus maps the store's errors to gRPC status codes.
func storeStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func (s *service) ListRuns(_ context.Context, req *pb.ListRunsRequest) (*pb.ListRunsResponse, error) {
	st, err := s.storeOr()
	if err != nil {
		return nil, err
	}
	f := store.Filter{Tags: req.GetTags(), Target: req.GetTarget(), SearchID: req.GetSearchId(), Limit: int(req.GetLimit())}
	if n := req.GetSinceUnixNano(); n != 0 {
		f.Since = time.Unix(0, n)
	}
	runs, err := st.List(f)
	if err != nil {
		return nil, storeStatus(err)
	}
	return &pb.ListRunsResponse{Runs: runs}, nil
}

func (s *service) GetRun(_ context.Context, req *pb.GetRunRequest) (*pb.GetRunResponse, error) {
	st, err := s.storeOr()
	if err != nil {
		return nil, err
	}
	get := st.Get
	if req.GetForReport() {
		get = st.GetForReport
	}
	r, err := get(req.GetRunId())
	if err != nil {
		return nil, storeStatus(err)
	}
	return &pb.GetRunResponse{Run: r}, nil
}

func (s *service) DeleteRun(_ context.Context, req *pb.DeleteRunRequest) (*pb.DeleteRunResponse, error) {
	st, err := s.storeOr()
	if err != nil {
		return nil, err
	}
	s.c.mu.Lock()
	active := s.c.active[req.GetRunId()] != nil
	s.c.mu.Unlock()
	if active {
		return nil, status.Errorf(codes.FailedPrecondition, "run %s is in progress: stop it first (coordctl run's Ctrl-C)", req.GetRunId())
	}
	if err := st.Delete(req.GetRunId()); err != nil {
		return nil, storeStatus(err)
	}
	s.c.log.Info("stored run removed", "run_id", req.GetRunId())
	return &pb.DeleteRunResponse{}, nil
}

func (s *service) ImportRun(_ context.Context, req *pb.ImportRunRequest) (*pb.ImportRunResponse, error) {
	st, err := s.storeOr()
	if err != nil {
		return nil, err
	}
	if err := store.Check(req.GetRun()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := st.Import(req.GetRun()); err != nil {
		return nil, storeStatus(err)
	}
	s.c.log.Info("run imported", "run_id", req.GetRun().GetRunId())
	return &pb.ImportRunResponse{}, nil
}

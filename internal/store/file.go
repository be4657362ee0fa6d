package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// FileFormat and FileVersion mark a .phx file: a RunFile message
// (proto/phalanx/v1/coordinator.proto) as protobuf JSON (protojson,
// indented; histograms are base64 of HdrHistogram's V2 compressed
// encoding), holding one StoredRun with its result and intervals. A reader
// refuses another format or a newer version, and ignores fields it does
// not know (a newer writer's additions within the version).
const (
	FileFormat  = "phalanx-run"
	FileVersion = 1
)

// WriteFile writes run r as a .phx file to w.
func WriteFile(w io.Writer, r *pb.StoredRun) error {
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&pb.RunFile{Format: FileFormat, Version: FileVersion, Run: r})
	if err != nil {
		return fmt.Errorf("encode run %s: %w", r.GetRunId(), err)
	}
	if _, err := w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("write run %s: %w", r.GetRunId(), err)
	}
	return nil
}

// ReadFile decodes a .phx file and checks its run (Check). Errors say what
// is wrong: not a .phx file, a newer version, a run that does not decode.
func ReadFile(data []byte) (*pb.StoredRun, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return nil, errors.New("not a .phx file (want the JSON that coordctl export writes)")
	}
	f := &pb.RunFile{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("not a valid .phx file: %w", err)
	}
	if f.GetFormat() != FileFormat {
		return nil, fmt.Errorf("not a .phx file: format %q, want %q", f.GetFormat(), FileFormat)
	}
	if f.GetVersion() > FileVersion {
		return nil, fmt.Errorf(".phx version %d is newer than this build's %d: use a newer coordctl", f.GetVersion(), FileVersion)
	}
	if err := Check(f.GetRun()); err != nil {
		return nil, err
	}
	return f.GetRun(), nil
}

// Check verifies that run r can be stored and reported: it has an ID and
// a known state, and its result and every interval decode (histograms of
// Phalanx's geometry, counters measure knows). Errors name the run and
// the part at fault.
func Check(r *pb.StoredRun) error {
	if r == nil {
		return errors.New("no run")
	}
	if r.GetRunId() == "" {
		return errors.New("run has no run_id")
	}
	if _, ok := pb.RunState_name[int32(r.GetState())]; !ok || r.GetState() == pb.RunState_RUN_STATE_UNSPECIFIED {
		return fmt.Errorf("run %s: unknown state %d", r.GetRunId(), r.GetState())
	}
	if res := r.GetResult(); res != nil {
		if _, err := wire.RunFromProto(res); err != nil {
			return err
		}
	}
	for _, pr := range r.GetIntervals() {
		if _, err := wire.IntervalFromProto(pr.GetPoint()); err != nil {
			return fmt.Errorf("run %s interval %d: %w", r.GetRunId(), pr.GetIndex(), err)
		}
		if _, err := wire.CountsFromProto(pr.GetCounters()); err != nil {
			return fmt.Errorf("run %s interval %d: %w", r.GetRunId(), pr.GetIndex(), err)
		}
	}
	return nil
}

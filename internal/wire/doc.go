// Package wire converts between the protobuf messages of proto/phalanx/v1
// and the internal Go models (internal/plan, internal/measure's counts,
// internal/hist's sets and kinds, internal/merge's timeline and stages,
// internal/report's Run), so that none of
// them imports protobuf or gRPC. It owns no behaviour.
package wire

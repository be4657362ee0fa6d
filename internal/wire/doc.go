// Package wire converts between the protobuf messages of proto/phalanx/v1
// and the internal Go models (internal/plan, internal/engine), so that
// neither the plan nor the engine imports protobuf. It owns no behaviour.
package wire

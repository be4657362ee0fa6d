// Package version holds the Phalanx version and commit the binaries were
// built from: stamped at build time with the linker (make build does it),
//
//	go build -ldflags "-X github.com/phalanxload/phalanx/internal/version.Version=v0.3.0 \
//	    -X github.com/phalanxload/phalanx/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/...
//
// and, when not stamped, taken from the Go build information
// (runtime/debug.ReadBuildInfo: the main module's version and the
// vcs.revision setting that go build records in a git checkout). It is
// what --version prints, what agents advertise in their node meta and what
// the engine sends in its User-Agent. It leaves printing to the commands.
package version

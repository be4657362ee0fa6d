package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the Phalanx version, e.g. "v0.3.0" or git describe's
// "v0.3.0-4-g1a2b3c4-dirty". Set with -ldflags -X; when not set, the main
// module's version from the build information (a tag, or Go's
// pseudo-version of the commit), else "dev".
var Version string

// Commit is the full git commit hash the binaries were built from. Set with
// -ldflags -X; when not set, the build information's vcs.revision (with
// "-dirty" appended when vcs.modified is true), else "unknown".
var Commit string

func init() {
	bi, _ := debug.ReadBuildInfo()
	Version, Commit = resolve(Version, Commit, bi)
}

// resolve returns the version and commit: the stamped ones, else those
// found in bi (which may be nil), else "dev" and "unknown".
func resolve(version, commit string, bi *debug.BuildInfo) (string, string) {
	if bi != nil {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		if commit == "" {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			commit = rev
		}
	}
	if version == "" {
		version = "dev"
	}
	if commit == "" {
		commit = "unknown"
	}
	return version, commit
}

// String returns the version line the commands' --version prints after
// their name: "VERSION (commit COMMIT, GOVERSION GOOS/GOARCH)", e.g.
// "v0.3.0 (commit 1a2b3c4d..., go1.26.8 linux/amd64)".
func String() string {
	var b strings.Builder
	b.WriteString(Version)
	b.WriteString(" (commit ")
	b.WriteString(Commit)
	b.WriteString(", ")
	b.WriteString(runtime.Version())
	b.WriteString(" ")
	b.WriteString(runtime.GOOS + "/" + runtime.GOARCH)
	b.WriteString(")")
	return b.String()
}

package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	info := func(main string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/phalanxload/phalanx", Version: main}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name                 string
		version, commit      string
		bi                   *debug.BuildInfo
		wantVersion, wantRev string
	}{
		{"stamped wins", "v1.2.3", "abc", info("v0.0.0-x", "vcs.revision", "def"), "v1.2.3", "abc"},
		{"from build info", "", "", info("v0.9.0", "vcs.revision", "def", "vcs.modified", "false"), "v0.9.0", "def"},
		{"dirty tree", "", "", info("(devel)", "vcs.revision", "def", "vcs.modified", "true"), "dev", "def-dirty"},
		{"no vcs", "", "", info("(devel)"), "dev", "unknown"},
		{"no build info", "", "", nil, "dev", "unknown"},
		{"version stamped only", "v2.0.0", "", info("(devel)", "vcs.revision", "def"), "v2.0.0", "def"},
	} {
		v, c := resolve(tc.version, tc.commit, tc.bi)
		if v != tc.wantVersion || c != tc.wantRev {
			t.Errorf("%s: resolve = %q, %q; want %q, %q", tc.name, v, c, tc.wantVersion, tc.wantRev)
		}
	}
}

func TestString(t *testing.T) {
	s := String()
	for _, want := range []string{Version, "commit " + Commit, runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, lacks %q", s, want)
		}
	}
}

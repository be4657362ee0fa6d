package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dockerfile is the repository's Dockerfile as instructions: continuation
// lines joined, comments and blank lines dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur += c + " "
			continue
		}
		out = append(out, cur+trimmed)
		cur = ""
	}
	return out
}

// TestDockerfile checks what the README says of the image, where Docker
// cannot run (not here, nor in CI): its build stage is the Go toolchain's
// image at go.mod's Go version and its final stage scratch, running as a
// non-root user, holding the three binaries; and the build stage's go build
// command, run here with the Dockerfile's own variables, builds static
// binaries stamped with VERSION and COMMIT.
func TestDockerfile(t *testing.T) {
	lines := dockerfile(t)
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	var froms []string
	var final []string // the last stage's instructions
	var build string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ARG GO_VERSION="):
			if v := strings.TrimPrefix(l, "ARG GO_VERSION="); v != string(goVersion[1]) {
				t.Errorf("Dockerfile GO_VERSION %s, go.mod's go %s", v, goVersion[1])
			}
		case strings.HasPrefix(l, "FROM "):
			f := strings.Fields(l)
			image := f[1]
			if strings.HasPrefix(image, "--platform=") {
				image = f[2]
			}
			froms = append(froms, image)
			final = nil
		case strings.HasPrefix(l, "RUN ") && strings.Contains(l, " go build "):
			build = strings.TrimPrefix(l, "RUN ")
		}
		final = append(final, l)
	}
	if len(froms) != 2 || froms[0] != "golang:${GO_VERSION}" || froms[1] != "scratch" {
		t.Errorf("stages FROM %v, want golang:${GO_VERSION} then scratch", froms)
	}
	user := ""
	copied := ""
	for _, l := range final {
		if u, ok := strings.CutPrefix(l, "USER "); ok {
			user = u
		}
		if strings.HasPrefix(l, "COPY --from=build ") && strings.HasSuffix(l, " /usr/local/bin/") {
			copied = l
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage USER %q, want a non-root uid", user)
	}
	for _, b := range []string{"agent", "coordinator", "coordctl"} {
		if !strings.Contains(copied, "/out/"+b+" ") {
			t.Errorf("final stage copies %q, not /out/%s into /usr/local/bin/", copied, b)
		}
	}

	if build == "" || !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("build stage RUN %q: want a CGO_ENABLED=0 go build", build)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(build, "/out/", out+"/"))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-docker", "COMMIT=0123abc", "TARGETOS=linux", "TARGETARCH=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the build stage's go build: %v\n%s", err, b)
	}
	v, err := exec.Command(filepath.Join(out, "agent"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "agent v0.0.0-docker (commit 0123abc,") {
		t.Errorf("agent --version = %q, %v; want agent v0.0.0-docker (commit 0123abc, ...", v, err)
	}
}

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// releaseDirEnv names a directory that make release filled (.ci/run runs it
// once, for both platforms); without it the test runs deploy/release.sh
// itself for linux/amd64 alone.
const releaseDirEnv = "PHALANX_RELEASE_DIR"

// releaseBinaries are the files every tarball's bin/ holds.
var releaseBinaries = []string{"agent", "coordctl", "coordinator"}

// TestReleaseTarball: make release's amd64 tarball, checked against
// SHA256SUMS and unpacked, holds the three binaries, static (no ELF
// interpreter) and built for its platform, the README and the systemd units
// with their environment files; its agent prints the tarball's version on
// --version. An arm64 tarball beside it holds static arm64 binaries.
func TestReleaseTarball(t *testing.T) {
	dir := os.Getenv(releaseDirEnv)
	if dir == "" {
		dir = t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), procBuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "../deploy/release.sh")
		cmd.Env = append(os.Environ(), "VERSION="+procVersion, "COMMIT="+procCommit, "OUT="+dir, "PLATFORMS=linux/amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deploy/release.sh: %v\n%s", err, out)
		}
	}
	sums := releaseSums(t, dir)
	amd64, err := filepath.Glob(filepath.Join(dir, "phalanx-*-linux-amd64.tar.gz"))
	if err != nil || len(amd64) != 1 {
		t.Fatalf("%s: amd64 tarballs %v, %v; want one", dir, amd64, err)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(amd64[0]), "phalanx-"), "-linux-amd64.tar.gz")

	tarballs, _ := filepath.Glob(filepath.Join(dir, "phalanx-*.tar.gz"))
	for _, tb := range tarballs {
		base := filepath.Base(tb)
		if got := fileSHA256(t, tb); sums[base] != got {
			t.Errorf("SHA256SUMS gives %s as %q, its digest is %s", base, sums[base], got)
		}
		arch := strings.TrimSuffix(base[strings.LastIndex(base, "-")+1:], ".tar.gz")
		root := unpack(t, tb)
		top := strings.TrimSuffix(base, ".tar.gz")
		for _, f := range []string{"README.md", "systemd/phalanx-agent.service", "systemd/phalanx-coordinator.service", "systemd/agent.env", "systemd/coordinator.env"} {
			if _, err := os.Stat(filepath.Join(root, top, f)); err != nil {
				t.Errorf("%s: no %s", base, f)
			}
		}
		for _, b := range releaseBinaries {
			checkStaticELF(t, filepath.Join(root, top, "bin", b), arch)
		}
		if arch != "amd64" || runtime.GOARCH != "amd64" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, filepath.Join(root, top, "bin", "agent"), "--version").CombinedOutput()
		cancel()
		want := "agent " + version + " (commit "
		if err != nil || !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "linux/amd64") {
			t.Errorf("%s: agent --version = %q, %v; want %q... linux/amd64", base, out, err, want)
		}
	}
	if len(sums) != len(tarballs) {
		t.Errorf("SHA256SUMS lists %d files, %s holds %d tarballs", len(sums), dir, len(tarballs))
	}
}

// releaseSums reads dir/SHA256SUMS (sha256sum's format: digest, two
// spaces, file name).
func releaseSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS: bad line %q", line)
		}
		sums[name] = sum
	}
	return sums
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// unpack extracts the gzipped tarball into a new directory and returns it;
// it refuses an entry whose path leaves that directory.
func unpack(t *testing.T, tarball string) string {
	t.Helper()
	dst := t.TempDir()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", tarball, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dst
		}
		if err != nil {
			t.Fatalf("%s: %v", tarball, err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s owned by %d:%d, want 0:0", tarball, h.Name, h.Uid, h.Gid)
		}
		p := filepath.Join(dst, h.Name)
		if !strings.HasPrefix(p, dst+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q leaves the directory", tarball, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.FileMode(h.Mode)&0o755)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: %s: entry type %q, want only files and directories", tarball, h.Name, h.Typeflag)
		}
	}
}

// checkStaticELF fails unless path is an executable ELF file for arch
// (amd64 or arm64) with no interpreter: statically linked, as
// CGO_ENABLED=0 builds it.
func checkStaticELF(t *testing.T, path, arch string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		t.Errorf("%s: machine %v, want %v (%s)", path, f.Machine, want, arch)
	}
	if i := slices.IndexFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }); i >= 0 {
		t.Errorf("%s: has an ELF interpreter: dynamically linked", path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("%s: not executable (%v)", path, fmt.Sprint(err))
	}
}

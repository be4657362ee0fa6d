package agent

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/phalanxload/phalanx/internal/cpuset"
	"github.com/phalanxload/phalanx/internal/version"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TLSLibrary is the TLS implementation of the load engine: Go's standard
// crypto/tls, whose version is the Go version the agent was built with.
const TLSLibrary = "crypto/tls"

// CollectProvenance describes this host and build for a report (the
// Provenance proto): the host name, uname's system and kernel release, the
// CPU model (/proc/cpuinfo) and the number of CPUs online
// (/sys/devices/system/cpu/online, else runtime.NumCPU), the Go version and
// GOOS/GOARCH, the TLS library and the agent's version and commit. A part it
// cannot read is left empty (or 0), never guessed.
func CollectProvenance() *pb.Provenance {
	p := &pb.Provenance{
		GoVersion:         runtime.Version(),
		OsArch:            runtime.GOOS + "/" + runtime.GOARCH,
		TlsLibrary:        TLSLibrary,
		TlsLibraryVersion: runtime.Version(),
		AgentVersion:      version.Version,
		AgentCommit:       version.Commit,
		CpuCount:          int32(onlineCPUs()),
	}
	p.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		p.Kernel = strings.TrimSpace(unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		p.CpuModel = cpuModel(b)
	}
	return p
}

// onlineCPUs returns the number of CPUs online on the host.
func onlineCPUs() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if cpus, err := cpuset.Parse(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return len(cpus)
		}
	}
	return runtime.NumCPU()
}

// cpuModel returns the CPU model of a /proc/cpuinfo text: the first "model
// name" (x86, and arm64 kernels that print one), else "Hardware" (32-bit
// arm), else "CPU part" (arm64, the part number), else "".
func cpuModel(cpuinfo []byte) string {
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if _, seen := found[key]; !seen && value != "" {
			found[key] = value
		}
	}
	for _, key := range []string{"model name", "Hardware", "CPU part"} {
		if v := found[key]; v != "" {
			return v
		}
	}
	return ""
}

package report

import (
	"fmt"
	"strings"
)

// RunProvenance is what produced a run, as its result records it: the plan
// hash (RunResult.plan_hash: "sha256:" and the hex SHA-256 of the redacted
// plan) and the coordinator's build. Zero when the result has none (a
// coordinator before provenance, or a report coordctl built after losing
// the coordinator).
type RunProvenance struct {
	PlanHash           string
	CoordinatorVersion string
	CoordinatorCommit  string
}

// AgentProvenance describes an agent's host and build, as the agent
// collected it (agent.CollectProvenance) and sent it in Ready.
type AgentProvenance struct {
	// Hostname is os.Hostname; Kernel uname's system and release
	// ("Linux 6.1.0-18-amd64").
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	// CPUModel is /proc/cpuinfo's model name ("" when unknown); CPUCount
	// the CPUs online on the host (the agent's usable ones are Agent.CPUs
	// and its pin map Agent.CPUList).
	CPUModel string `json:"cpu_model"`
	CPUCount int32  `json:"cpu_count"`
	// GoVersion is the agent's Go toolchain ("go1.26.8"), OSArch its
	// GOOS/GOARCH.
	GoVersion string `json:"go_version"`
	OSArch    string `json:"os_arch"`
	// TLSLibrary and TLSLibraryVersion name the load engine's TLS stack
	// (Go's crypto/tls, versioned with Go).
	TLSLibrary        string `json:"tls_library"`
	TLSLibraryVersion string `json:"tls_library_version"`
	// AgentVersion and AgentCommit are the agent's build
	// (internal/version).
	AgentVersion string `json:"agent_version"`
	AgentCommit  string `json:"agent_commit"`
}

// Provenance is the report's record of what produced it: per run the plan
// hash, the coordinator's build and the start skew; per agent its host and
// build, pin map and clock. Report.Provenance is nil when the run carries
// none.
type Provenance struct {
	PlanHash           string `json:"plan_hash,omitempty"`
	CoordinatorVersion string `json:"coordinator_version,omitempty"`
	CoordinatorCommit  string `json:"coordinator_commit,omitempty"`
	// StartSkewUs is the spread of the agents' first sends, µs (as
	// Report.StartSkewUs).
	StartSkewUs float64              `json:"start_skew_us"`
	Agents      []AgentProvenanceRow `json:"agents"`
}

// AgentProvenanceRow is one agent's provenance: its host and build (nil
// fields when the agent sent none), its usable CPUs and pin map, and its
// clock offset (agent minus coordinator), the RTT of that sample and its
// first send's offset from the start instant, µs.
type AgentProvenanceRow struct {
	Name string `json:"name"`
	*AgentProvenance
	CPUs          int32   `json:"cpus"`
	CPUList       string  `json:"cpu_list,omitempty"`
	ClockOffsetUs float64 `json:"clock_offset_us"`
	RTTUs         float64 `json:"rtt_us"`
	StartOffsetUs float64 `json:"start_offset_us"`
}

// provenanceOf returns r's provenance, or nil when r records none (no plan
// hash, no coordinator version and no agent's provenance).
func provenanceOf(r *Run) *Provenance {
	pr := r.Provenance
	known := pr != RunProvenance{}
	out := &Provenance{PlanHash: pr.PlanHash, CoordinatorVersion: pr.CoordinatorVersion, CoordinatorCommit: pr.CoordinatorCommit,
		StartSkewUs: us(r.StartSkew), Agents: []AgentProvenanceRow{}}
	for _, a := range r.Agents {
		known = known || a.Provenance != nil
		out.Agents = append(out.Agents, AgentProvenanceRow{
			Name: a.Name, AgentProvenance: a.Provenance, CPUs: a.CPUs, CPUList: a.CPUList,
			ClockOffsetUs: us(a.ClockOffset), RTTUs: us(a.RTT), StartOffsetUs: us(a.StartOffset),
		})
	}
	if !known {
		return nil
	}
	return out
}

// writeProvenance writes the text report's compact provenance block: one
// line for the run, one per agent.
func (r *Report) writeProvenance(p *printer) {
	pv := r.Provenance
	if pv == nil {
		return
	}
	p.f("Provenance: plan %s, coordinator %s\n", orDash(pv.PlanHash), fmtBuild(pv.CoordinatorVersion, pv.CoordinatorCommit))
	for _, a := range pv.Agents {
		pinned := a.CPUList
		if pinned == "" {
			pinned = "not pinned"
		}
		if a.AgentProvenance == nil {
			p.f("  %s: %s (%s); no provenance sent\n", a.Name, plural(int64(a.CPUs), "CPU"), pinned)
			continue
		}
		ap := a.AgentProvenance
		p.f("  %s: host %s, %s, %d x %s, %s used (%s), %s %s, %s %s, agent %s\n",
			a.Name, orDash(ap.Hostname), orDash(ap.Kernel), ap.CPUCount, orDash(ap.CPUModel), plural(int64(a.CPUs), "CPU"), pinned,
			orDash(ap.GoVersion), orDash(ap.OSArch), orDash(ap.TLSLibrary), orDash(ap.TLSLibraryVersion), fmtBuild(ap.AgentVersion, ap.AgentCommit))
	}
}

// fmtBuild formats a version and commit as "v1.2.3 (commit 1a2b3c4d5e6f)",
// the commit cut to 12 digits.
func fmtBuild(version, commit string) string {
	if commit == "" {
		return orDash(version)
	}
	if len(commit) > 12 && !strings.HasSuffix(commit, "-dirty") {
		commit = commit[:12]
	}
	return fmt.Sprintf("%s (commit %s)", orDash(version), commit)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

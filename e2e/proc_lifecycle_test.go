package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/cpuset"
)

// agentDropBound is how soon coordctl agents stops listing an agent killed
// with SIGKILL, with --local (memberlist's local timings: README,
// coordctl agents): failure detection plus the coordinator's view.
const agentDropBound = 8 * time.Second

// TestProcAgentsLifecycle runs a cluster of processes through a user's
// first hour: coordctl agents shows each agent's pinned CPU list and
// version; the coordinator logs a run's target when it accepts it and its
// outcome when it ends; an agent killed with SIGKILL leaves coordctl
// agents within agentDropBound; and a clean shutdown (SIGTERM to every
// daemon at once) logs no ERROR line and exits 0.
func TestProcAgentsLifecycle(t *testing.T) {
	allowed, err := cpuset.Allowed()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("allowed CPUs: %v, %v", allowed, err)
	}
	pin := strconv.Itoa(allowed[len(allowed)-1])
	c := startProcCoordinator(t)
	pinned := c.addAgent(t, "proc-agent-1", "--cpus", pin)
	other := c.addAgent(t, "proc-agent-2")
	victim := c.addAgent(t, "proc-agent-3")

	// NAME ADDRESS SECURITY CPUS PINNED STATE VERSION MAX-CONNS MAX-RATE ALLOW-TARGETS
	stdout, stderr, code := runCoordctl(t, 30*time.Second, procEnv(), c.coordctlArgs("agents")...)
	if code != 0 {
		t.Fatalf("coordctl agents: exit %d\n%s", code, stderr)
	}
	for name, want := range map[string]string{"proc-agent-1": pin, "proc-agent-2": "-"} {
		if !regexpLine(stdout, `^`+name+`\s+\S+\s+insecure\s+\d+\s+`+regexp.QuoteMeta(want)+`\s+idle\s+`+regexp.QuoteMeta(procVersion)+`\s`) {
			t.Errorf("coordctl agents: no row for %s pinned to %q at version %s:\n%s", name, want, procVersion, stdout)
		}
	}

	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCoordctl(t, 60*time.Second, procEnv(), c.coordctlArgs("run", "-c3", "-d1", "--cacert", caFile, srv.URL+"/audit")...); code != 0 {
		t.Fatalf("coordctl run: exit %d\n%s", code, stderr)
	}
	target := regexp.QuoteMeta(srv.URL + "/audit")
	for _, re := range []string{
		`level=INFO msg="run accepted" .*run_id=\S+ target=` + target + ` method=GET load=closed connections=3 duration=1s agents="\[proc-agent-1 proc-agent-2 proc-agent-3\]"`,
		`level=INFO msg="run ended" .*run_id=\S+ outcome=complete target=` + target + ` took=\S+ requests=[1-9]\d* window=1s`,
	} {
		if !regexp.MustCompile(re).MatchString(c.coord.Stderr()) {
			t.Errorf("coordinator log lacks %s:\n%s", re, c.coord.Stderr())
		}
	}

	victim.Kill()
	killed := time.Now()
	if err := waitUntil(agentDropBound, c.coord, func(ctx context.Context) error {
		agents, err := listAgentsWith(ctx, c.grpcAddr, c.clientSecurity(t))
		if err != nil {
			return err
		}
		for _, a := range agents {
			if a.GetName() == victim.name {
				return fmt.Errorf("%s still listed", victim.name)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("a killed agent is still listed %v after SIGKILL (documented: within %v): %v", time.Since(killed).Round(time.Millisecond), agentDropBound, err)
	} else {
		t.Logf("killed agent dropped from the list after %v", time.Since(killed).Round(time.Millisecond))
	}

	// A clean stop: every daemon gets SIGTERM at once, as systemd or a
	// shell's kill of them all would send it.
	daemons := []*proc{c.coord, pinned, other}
	before := make([]int, len(daemons))
	for i, p := range daemons {
		before[i] = len(p.Stderr())
		p.mayExit.Store(true)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("%s: SIGTERM: %v", p.name, err)
		}
	}
	for i, p := range daemons {
		code, ok := p.Wait(procStopTimeout)
		if !ok || code != 0 {
			t.Errorf("%s after SIGTERM: exited %v, status %d; want 0\n%s", p.name, ok, code, p.describe())
			continue
		}
		if after := p.Stderr()[before[i]:]; strings.Contains(after, "level=ERROR") {
			t.Errorf("%s logged an ERROR line on a clean stop:\n%s", p.name, after)
		}
	}
}

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/cluster"
	"github.com/phalanxload/phalanx/internal/security"
	"github.com/phalanxload/phalanx/internal/security/securitytest"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// The systemd units and their environment files (deploy/systemd, shipped
// in the release tarballs), relative to the e2e directory.
const systemdDir = "../deploy/systemd"

// requireSystemdEnv, set to "1" (by .ci/run), fails rather than skips the
// tests that need systemd-analyze.
const requireSystemdEnv = "PHALANX_REQUIRE_SYSTEMD"

// unitFile is what a test reads of a unit file: every key=value of its
// [Service] section, in order, a key given twice keeping both.
type unitFile struct {
	path    string
	service [][2]string
}

func readUnit(t *testing.T, name string) unitFile {
	t.Helper()
	path := filepath.Join(systemdDir, name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{path: path}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", path, line)
			}
			u.service = append(u.service, [2]string{k, v})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns the value of the last key in [Service] ("" if absent).
func (u unitFile) get(key string) string {
	v := ""
	for _, kv := range u.service {
		if kv[0] == key {
			v = kv[1]
		}
	}
	return v
}

// envVar is one line of a systemd EnvironmentFile.
type envVar struct{ key, value string }

// readEnvFile reads a systemd EnvironmentFile (systemd.exec(5): KEY=VALUE
// lines, # and ; comments; the shipped files use no quotes, which this
// refuses so that the test reads them as systemd does).
func readEnvFile(t *testing.T, path string) []envVar {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []envVar
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(v, `"'\`) || strings.ContainsAny(k, " \t") {
			t.Fatalf("%s:%d: %q: want KEY=VALUE without quotes", path, i+1, line)
		}
		out = append(out, envVar{k, v})
	}
	return out
}

// shippedEnvFile returns the deploy/systemd file the unit's
// EnvironmentFile (/etc/phalanx/NAME) is installed from.
func shippedEnvFile(t *testing.T, u unitFile) string {
	t.Helper()
	p := strings.TrimPrefix(u.get("EnvironmentFile"), "-")
	if !strings.HasPrefix(p, "/etc/phalanx/") {
		t.Fatalf("%s: EnvironmentFile=%q, want /etc/phalanx/NAME", u.path, p)
	}
	return filepath.Join(systemdDir, filepath.Base(p))
}

// TestSystemdUnitsVerify: systemd-analyze verify accepts both units with
// nothing to say (it warns, yet exits 0, on an unknown key or a bad value),
// with ExecStart pointing at the built binary, as verify checks it is
// executable; the agent has CAP_SYS_NICE and no other capability, the
// coordinator none, and both the hardening the README promises.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv(requireSystemdEnv) == "1" {
			t.Fatalf("systemd-analyze: %v (apt-get install systemd)", err)
		}
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	for _, tc := range []struct {
		unit, binary, caps string
	}{
		{"phalanx-agent.service", "agent", "CAP_SYS_NICE"},
		{"phalanx-coordinator.service", "coordinator", ""},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			u := readUnit(t, tc.unit)
			for key, want := range map[string]string{
				"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectHome": "yes",
				"Restart": "on-failure", "User": "phalanx", "CapabilityBoundingSet": tc.caps, "AmbientCapabilities": tc.caps,
				"ExecStart": "/opt/phalanx/bin/" + tc.binary,
			} {
				if got := u.get(key); got != want {
					t.Errorf("%s: %s=%q, want %q", tc.unit, key, got, want)
				}
			}
			if u.get("RestrictRealtime") == "yes" && tc.caps != "" {
				t.Errorf("%s: RestrictRealtime=yes forbids the SCHED_FIFO start CAP_SYS_NICE is there for", tc.unit)
			}
			if n, err := strconv.Atoi(u.get("LimitNOFILE")); err != nil || n < 65536 {
				t.Errorf("%s: LimitNOFILE=%q, want at least 65536", tc.unit, u.get("LimitNOFILE"))
			}

			src, err := os.ReadFile(u.path)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			env := filepath.Join(dir, filepath.Base(shippedEnvFile(t, u)))
			b, err := os.ReadFile(shippedEnvFile(t, u))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(env, b, 0o640); err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(src), "ExecStart=/opt/phalanx/bin/"+tc.binary, "ExecStart="+procBinary(t, tc.binary))
			text = strings.ReplaceAll(text, "EnvironmentFile="+u.get("EnvironmentFile"), "EnvironmentFile="+env)
			unit := filepath.Join(dir, tc.unit)
			if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", tc.unit, err, out)
			}
		})
	}
}

// unitCommand returns the command line and the environment a unit starts
// its daemon with: ExecStart, the binary being the built one, and the
// shipped environment file with each variable in override replaced. It
// fails when the file lacks a variable of override (it must keep showing
// it), and when a variable names no flag of the daemon (a typo there
// would be ignored).
func unitCommand(t *testing.T, u unitFile, binary string, override map[string]string) ([]string, []string) {
	t.Helper()
	argv := strings.Fields(u.get("ExecStart"))
	if len(argv) == 0 || filepath.Base(argv[0]) != binary {
		t.Fatalf("%s: ExecStart=%q, want the %s binary", u.path, u.get("ExecStart"), binary)
	}
	argv[0] = procBinary(t, binary)
	help, err := exec.Command(argv[0], "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", binary, err, help)
	}
	vars := readEnvFile(t, shippedEnvFile(t, u))
	var env []string
	seen := map[string]bool{}
	for _, v := range vars {
		flag := "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(v.key, "PHALANX_")), "_", "-")
		if !strings.HasPrefix(v.key, "PHALANX_") || !strings.Contains(string(help), flag+" ") {
			t.Errorf("%s: %s names no flag of %s (%s)", shippedEnvFile(t, u), v.key, binary, flag)
		}
		if o, ok := override[v.key]; ok {
			v.value = o
			seen[v.key] = true
		}
		env = append(env, v.key+"="+v.value)
	}
	for k := range override {
		if !seen[k] {
			t.Errorf("%s: no %s", shippedEnvFile(t, u), k)
		}
	}
	return argv, procEnv(env...)
}

// TestSystemdAgentUnitJoins starts the coordinator and the agent as their
// units do, from ExecStart and the shipped environment files, with only
// the addresses (loopback, free ports), the TLS files (a test CA) and the
// gossip key file (one key for both) replaced: the agent joins the
// coordinator over mutual TLS and encrypted gossip, and the coordinator
// lists it idle at its gRPC address.
func TestSystemdAgentUnitJoins(t *testing.T) {
	pki := securitytest.New(t)
	dir := t.TempDir()
	key, err := cluster.ParseKey(cluster.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	keyFile := func(name string) string {
		p := filepath.Join(dir, name+".gossip.keys")
		if err := cluster.WriteKeyFile(p, [][]byte{key}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tlsVars := func(f security.Files) map[string]string {
		return map[string]string{"PHALANX_TLS_CA": f.CA, "PHALANX_TLS_CERT": f.Cert, "PHALANX_TLS_KEY": f.Key}
	}

	ports := freePorts(t, 4)
	coordGRPC, coordGossip := loopback(ports[0]), loopback(ports[1])
	over := tlsVars(pki.Files(t, security.RoleCoordinator, "unit-coordinator"))
	over["PHALANX_GRPC_ADDR"], over["PHALANX_GOSSIP_ADDR"] = coordGRPC, coordGossip
	over["PHALANX_GOSSIP_KEY_FILE"] = keyFile("coordinator")
	argv, env := unitCommand(t, readUnit(t, "phalanx-coordinator.service"), "coordinator", over)
	coord := startProc(t, "coordinator", true, env, argv[0], argv[1:]...)

	agentGRPC := loopback(ports[2])
	over = tlsVars(pki.Files(t, security.RoleAgent, "unit-agent"))
	over["PHALANX_GRPC_ADDR"], over["PHALANX_GOSSIP_ADDR"] = agentGRPC, loopback(ports[3])
	over["PHALANX_JOIN"] = coordGossip
	over["PHALANX_GOSSIP_KEY_FILE"] = keyFile("agent")
	argv, env = unitCommand(t, readUnit(t, "phalanx-agent.service"), "agent", over)
	agent := startProc(t, "agent", true, env, argv[0], argv[1:]...)

	client, err := security.LoadFiles(security.RoleClient, pki.Files(t, security.RoleClient, "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []*pb.NodeMeta
	err = waitUntil(procReadyTimeout, agent, func(ctx context.Context) error {
		if coord.Exited() {
			return fmt.Errorf("coordinator exited\n%s", coord.describe())
		}
		agents, err := listAgentsWith(ctx, coordGRPC, client)
		if err != nil {
			return err
		}
		if len(agents) != 1 || agents[0].GetState() != pb.AgentState_AGENT_STATE_IDLE {
			return fmt.Errorf("coordinator lists %v, want one idle agent", agents)
		}
		listed = agents
		return nil
	})
	if err != nil {
		t.Fatalf("agent started from its unit never joined: %v\n%s\n%s", err, agent.describe(), coord.describe())
	}
	if got := listed[0].GetGrpcAddr(); got != agentGRPC {
		t.Errorf("agent's gRPC address %q, want %q (PHALANX_GRPC_ADDR)", got, agentGRPC)
	}
	if !slices.ContainsFunc(strings.Split(agent.Stderr(), "\n"), func(l string) bool {
		return strings.Contains(l, "allow_targets=198.18.0.0/15")
	}) {
		t.Errorf("agent did not take PHALANX_ALLOW_TARGETS from agent.env:\n%s", agent.Stderr())
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startTargetCmd runs `coordctl target args...` in-process until the test
// ends, and returns its URL, its CA file and a stop function that ends it
// and returns everything it printed after its listening line.
func startTargetCmd(t *testing.T, args ...string) (url, caFile string, stop func() string) {
	t.Helper()
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	pr, pw := io.Pipe()
	cmd := newTargetCmd()
	cmd.SetArgs(append([]string{"--addr", "127.0.0.1:0", "--ca-out", caFile}, args...))
	cmd.SetOut(pw)
	cmd.SetErr(pw)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	listening := regexp.MustCompile(`^target (https://\S+) listening$`)
	select {
	case l := <-lines:
		m := listening.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("coordctl target: first line %q, want 'target URL listening'", l)
		}
		url = m[1]
	case <-time.After(10 * time.Second):
		t.Fatal("coordctl target: no listening line in 10 s")
	}
	stopped := false
	var rest strings.Builder
	stop = func() string {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("coordctl target: %v", err)
			}
			for l := range lines {
				rest.WriteString(l + "\n")
			}
		}
		return rest.String()
	}
	t.Cleanup(func() { stop() })
	return url, caFile, stop
}

// TestRunHTTP3AgainstTarget: coordctl target serves HTTP/3 by default, and
// coordctl run --http3 against it completes every request with no error;
// the target saw exactly the report's requests, over QUIC connections.
func TestRunHTTP3AgainstTarget(t *testing.T) {
	env := newTestEnv(t, 2)
	url, caFile, stop := startTargetCmd(t)
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "--http3", "-c", "2", "-n", "40",
		"--cacert", caFile, "--json", jsonFile, url)
	if code != 0 {
		t.Fatalf("coordctl run --http3: exit %d: %s\n%s", code, stderr, stdout)
	}
	var rep struct {
		Requests int64            `json:"requests"`
		Errors   map[string]int64 `json:"errors"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 40 || len(rep.Errors) != 0 {
		t.Errorf("report: %d requests, errors %v; want 40 and none", rep.Requests, rep.Errors)
	}
	out := stop()
	m := regexp.MustCompile(`requests=(\d+) connections=(\d+) quic_connections=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("coordctl target printed no counts when stopped:\n%s", out)
	}
	served, _ := strconv.ParseInt(m[1], 10, 64)
	tcp, _ := strconv.ParseInt(m[2], 10, 64)
	quic, _ := strconv.ParseInt(m[3], 10, 64)
	if served != rep.Requests || tcp != 0 || quic < 2 {
		t.Errorf("target saw %d requests, %d TCP and %d QUIC connections; want %d requests, 0 TCP, at least 2 QUIC", served, tcp, quic, rep.Requests)
	}
}

// TestTargetHTTP3Off: --http3=false serves TCP only: the UDP port of the
// TCP port's number stays free, and no HTTP/3 line is printed; coordctl
// run --http3 against it fails as a run against a closed TCP port does:
// its connections cannot be opened (a connect error), exit 1.
func TestTargetHTTP3Off(t *testing.T) {
	env := newTestEnv(t, 1)
	url, caFile, stop := startTargetCmd(t, "--http3=false")
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "--http3", "-c", "2", "-d", "1s", "--timeout", "300ms",
		"--cacert", caFile, url)
	if out := stdout + stderr; code != 1 || !strings.Contains(out, "open connections") || !strings.Contains(out, "no answer from the server") {
		t.Errorf("coordctl run --http3 against a TCP-only target: exit %d, want 1, its connections not opened, no answer from the server:\n%s\n%s", code, stdout, stderr)
	}
	addr, err := net.ResolveUDPAddr("udp", strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", addr)
	if err != nil {
		t.Fatalf("coordctl target --http3=false holds UDP %s: %v", addr, err)
	}
	_ = c.Close()
	if out := stop(); strings.Contains(out, "HTTP/3") || !strings.Contains(out, "quic_connections=0") {
		t.Errorf("coordctl target --http3=false printed %q, want no HTTP/3 line and quic_connections=0", out)
	}
}

// TestTargetBusyPortKeepsCA: a second coordctl target on a port already
// taken fails naming the address and leaves the first one's --ca-out as it
// was: the CA file still verifies the running target, so a run against it
// is not told the certificate is signed by an unknown authority.
func TestTargetBusyPortKeepsCA(t *testing.T) {
	url, caFile, _ := startTargetCmd(t)
	before, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/")
	cmd := newTargetCmd()
	cmd.SetArgs([]string{"--addr", addr, "--ca-out", caFile})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err = cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("coordctl target --addr %s while another target holds it: %v, want an error naming the address", addr, err)
	}
	after, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("coordctl target --addr %s (busy) overwrote --ca-out %s: the running target's CA is lost", addr, caFile)
	}
}

// TestRunHTTP3EarlyDataAgainstTarget: coordctl target allows 0-RTT, so
// coordctl run --http3 --early-data at a connection rate with resumption
// has its resumed connections send their request in 0-RTT, accepted
// (offered = accepted, some), every request served once and none an error.
func TestRunHTTP3EarlyDataAgainstTarget(t *testing.T) {
	skip0RTTUnderRace(t)
	env := newTestEnv(t, 1)
	url, caFile, stop := startTargetCmd(t)
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI("--coordinator", env.coord, "run", "--http3", "--cps", "40", "-d", "1s", "--tls-resume", "--early-data",
		"--cacert", caFile, "--json", jsonFile, url)
	if code != 0 {
		t.Fatalf("coordctl run --http3 --early-data: exit %d: %s\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "0-RTT: ") {
		t.Errorf("text report has no 0-RTT counts:\n%s", stdout)
	}
	var rep struct {
		Requests   int64            `json:"requests"`
		Errors     map[string]int64 `json:"errors"`
		Handshakes struct {
			Resumed  int64 `json:"resumed"`
			Offered  int64 `json:"early_offered"`
			Accepted int64 `json:"early_accepted"`
		} `json:"handshakes"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	h := rep.Handshakes
	if rep.Requests == 0 || len(rep.Errors) != 0 || h.Accepted == 0 || h.Offered != h.Accepted || h.Accepted > h.Resumed {
		t.Errorf("report: %d requests, errors %v, %d resumed, 0-RTT %d offered, %d accepted; want requests, no error, some accepted, all offered accepted",
			rep.Requests, rep.Errors, h.Resumed, h.Offered, h.Accepted)
	}
	out := stop()
	m := regexp.MustCompile(`requests=(\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("coordctl target printed no counts when stopped:\n%s", out)
	}
	if served, _ := strconv.ParseInt(m[1], 10, 64); served != rep.Requests {
		t.Errorf("target served %d requests, report %d", served, rep.Requests)
	}
}

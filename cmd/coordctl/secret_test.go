package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/target/targettest"
)

// TestNoSecretInResultJSONOrLogs runs a plan with a client certificate and
// key (--cert/--key), an Authorization header and a token in the URL's
// query (access_token, RFC 6750 section 2.3), through coordctl run and
// through the coordinator in this process, with every member logging at
// debug level: no PEM block and no token appears in the result, the JSON
// report, coordctl's output or the logs.
func TestNoSecretInResultJSONOrLogs(t *testing.T) {
	const token = "Bearer tok-3f9a1c"
	srv, b := targettest.Start(t)
	dir := t.TempDir()
	caFile, certFile, keyFile, err := b.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := localcluster.Start(context.Background(), 2, 1, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	noSecret := func(what string, b []byte) {
		t.Helper()
		for _, s := range []string{"-----BEGIN", "PRIVATE KEY", "tok-3f9a1c", "qtok-77e1"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret (%q)", what, s)
			}
		}
	}

	jsonFile := filepath.Join(dir, "report.json")
	code, stdout, stderr := runCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", "-c2", "-d1",
		"--cacert", caFile, "--cert", certFile, "--key", keyFile, "-H", "Authorization: "+token,
		"--latency", "--json", jsonFile, srv.URL()+"?access_token=qtok-77e1")
	if code != 0 {
		t.Fatalf("coordctl run: exit %d\n%s", code, stderr)
	}
	report, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(report, []byte(`"requests"`)) {
		t.Fatalf("JSON report without requests:\n%s", report)
	}
	noSecret("the JSON report", report)
	noSecret("coordctl's stdout", []byte(stdout))
	noSecret("coordctl's stderr", []byte(stderr))

	// A bad pair (certificate and key swapped) is refused without quoting
	// either file.
	code, _, stderr = runCLI("--coordinator", c.Coordinator.GRPCAddr(), "run", "-c2", "-d1",
		"--cacert", caFile, "--cert", keyFile, "--key", certFile, srv.URL())
	if code == 0 || !strings.Contains(stderr, "client certificate") {
		t.Errorf("coordctl run with a swapped pair: exit %d, stderr %q; want an error naming the client certificate", code, stderr)
	}
	if strings.Contains(stderr, "-----BEGIN") || strings.Contains(stderr, string(keyPEM[30:60])) {
		t.Errorf("the error quotes the key or certificate: %s", stderr)
	}

	p := plan.Plan{URL: srv.URL() + "?x=1&access_token=qtok-77e1", Connections: 2, Duration: time.Second,
		Headers: []plan.Header{{Name: "Authorization", Value: token}},
		TLS:     plan.TLS{CAPEM: b.CAPEM, CertPEM: certPEM, KeyPEM: keyPEM}}
	before := srv.Requests()
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Requests() == before {
		t.Fatal("the in-process run sent no request")
	}
	bin, err := proto.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	noSecret("the result (protobuf)", bin)
	js, err := protojson.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	noSecret("the result (JSON)", js)
	if !strings.Contains(string(js), plan.RedactedValue) {
		t.Errorf("the result's plan does not show the header as redacted:\n%s", js)
	}
	if err := c.Close(); err != nil {
		t.Errorf("cluster close: %v", err)
	}
	logs.mu.Lock()
	noSecret("the logs", logs.b.Bytes())
	if logs.b.Len() == 0 {
		t.Error("no log lines: the check proves nothing")
	}
	logs.mu.Unlock()
}

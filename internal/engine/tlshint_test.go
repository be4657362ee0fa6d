package engine

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/tlsgen"
)

// TestVerifyFailureSaysWhatToDo: a certificate from an untrusted CA, and
// one for another name, fail the preparation with what to do: --cacert or
// --insecure, --sni or --insecure; a CA the user gave that does not sign
// it is named (its file, when it came from one); a handshake error that is
// no verification failure gets no such hint.
func TestVerifyFailureSaysWhatToDo(t *testing.T) {
	srv, _, ca := tlsTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	other, err := tlsgen.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	otherCA := other.CAPEM
	for _, tc := range []struct {
		name string
		tls  plan.TLS
		want string
	}{
		{"untrusted CA", plan.TLS{}, "not signed by a CA this agent trusts: trust its CA with --cacert FILE, tls.ca_file in a plan file; or, for a throwaway certificate, skip verification with --insecure"},
		{"another name", plan.TLS{CAPEM: ca, ServerName: "other.test"}, "not for the name verified: give the name it is for with --sni NAME"},
		{"the wrong CA file", plan.TLS{CAPEM: otherCA, CAFile: "certs/wrong-ca.pem"}, "signed neither by the system's CAs nor by the CA file given, certs/wrong-ca.pem (--cacert, tls.ca_file): give the CA that signed it"},
		{"the wrong CA, no file", plan.TLS{CAPEM: otherCA}, "signed neither by the system's CAs nor by the CA certificates the plan gives"},
	} {
		e := newEngine(t, plan.Plan{URL: srv.URL, Connections: 1, TLS: tc.tls}, 1)
		_, err := e.Prepare(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Prepare error %v; want %q", tc.name, err, tc.want)
		}
	}
	if h := verifyHint(context.DeadlineExceeded, plan.TLS{CAFile: "ca.pem"}); h != "" {
		t.Errorf("verifyHint(a deadline) = %q, want none", h)
	}
}

package daemon

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/security"
)

// TestBindEnv: a flag on the command line wins over its environment
// variable, which wins over the default; a bad value names the variable.
func TestBindEnv(t *testing.T) {
	t.Setenv("PHALANX_TLS_CA", "/env/ca.pem")
	t.Setenv("PHALANX_TLS_CERT", "/env/cert.pem")
	t.Setenv("PHALANX_TLS_KEY", "")
	t.Setenv("PHALANX_INSECURE_CLUSTER", "true")
	var (
		files    security.Files
		insecure bool
	)
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	names := SecurityFlags(fs, &files, &insecure)
	if err := fs.Parse([]string{"--tls-cert", "/flag/cert.pem"}); err != nil {
		t.Fatal(err)
	}
	if err := BindEnv(fs, names...); err != nil {
		t.Fatal(err)
	}
	want := security.Files{CA: "/env/ca.pem", Cert: "/flag/cert.pem"}
	if files != want || !insecure {
		t.Errorf("files %+v, insecure %v; want %+v, true", files, insecure, want)
	}

	t.Setenv("PHALANX_INSECURE_CLUSTER", "maybe")
	fs = pflag.NewFlagSet("agent", pflag.ContinueOnError)
	names = SecurityFlags(fs, &files, &insecure)
	if err := BindEnv(fs, names...); err == nil || !strings.Contains(err.Error(), `PHALANX_INSECURE_CLUSTER="maybe" (for --insecure-cluster)`) {
		t.Errorf("BindEnv with a bad boolean: %v", err)
	}
	if err := BindEnv(fs, "nope"); err == nil {
		t.Error("BindEnv of an unknown flag: want an error")
	}
	if got := EnvName("tls-ca"); got != "PHALANX_TLS_CA" {
		t.Errorf("EnvName(tls-ca) = %q", got)
	}
}

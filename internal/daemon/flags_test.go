package daemon

import (
	"maps"
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
	if files.CA != "/env/ca.pem" || files.Cert != "/flag/cert.pem" || files.Key != "" || !insecure {
		t.Errorf("files %+v, insecure %v; want CA /env/ca.pem, Cert /flag/cert.pem, no Key, true", files, insecure)
	}
	// Origins names the variables of the values taken from the
	// environment, and only those.
	from := Origins(fs, names...)
	wantFrom := map[string]string{"tls-ca": "PHALANX_TLS_CA (environment)", "insecure-cluster": "PHALANX_INSECURE_CLUSTER (environment)"}
	if !maps.Equal(from, wantFrom) {
		t.Errorf("Origins = %v; want %v", from, wantFrom)
	}

	t.Setenv("PHALANX_INSECURE_CLUSTER", "maybe")
	fs = pflag.NewFlagSet("agent", pflag.ContinueOnError)
	names = SecurityFlags(fs, &files, &insecure)
	if err := BindEnv(fs, names...); err == nil || !strings.Contains(err.Error(), `PHALANX_INSECURE_CLUSTER="maybe" (for --insecure-cluster): want true or false`) || strings.Contains(err.Error(), "strconv") {
		t.Errorf("BindEnv with a bad boolean: %v", err)
	}
	if err := BindEnv(fs, "nope"); err == nil {
		t.Error("BindEnv of an unknown flag: want an error")
	}
	if got := EnvName("tls-ca"); got != "PHALANX_TLS_CA" {
		t.Errorf("EnvName(tls-ca) = %q", got)
	}
}

// TestFlagNamesBindsSlices: every flag but help and version is named, and
// a list flag bound from its variable takes the variable's list in place
// of its default (PHALANX_JOIN="a:1,b:2" for --join).
func TestFlagNamesBindsSlices(t *testing.T) {
	t.Setenv("PHALANX_JOIN", "agents.example:7946,10.0.0.1:7946")
	t.Setenv("PHALANX_LOCAL", "true")
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	join := fs.StringSlice("join", []string{"default:1"}, "")
	local := fs.Bool("local", false, "")
	fs.Bool("help", false, "")
	fs.Bool("version", false, "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	names := FlagNames(fs)
	if strings.Join(names, " ") != "join local" {
		t.Errorf("FlagNames = %v, want [join local]", names)
	}
	if err := BindEnv(fs, names...); err != nil {
		t.Fatal(err)
	}
	if strings.Join(*join, " ") != "agents.example:7946 10.0.0.1:7946" || !*local {
		t.Errorf("--join %v, --local %v; want the environment's two seeds and true", *join, *local)
	}
}

package daemon

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/phalanxload/phalanx/internal/security"
)

// EnvPrefix starts the name of every environment variable a daemon flag is
// read from: --tls-ca is also PHALANX_TLS_CA.
const EnvPrefix = "PHALANX_"

// EnvName returns the environment variable of a flag: EnvPrefix and the
// flag's name in upper case with '-' as '_' ("tls-ca" -> "PHALANX_TLS_CA").
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// BindEnv sets each named flag of fs that the command line did not set from
// its environment variable (EnvName), when that is set and not empty: a
// flag given on the command line wins over the environment, which wins over
// the default. A value the flag refuses is an error naming the variable.
// Call it after parsing (cobra: first thing in RunE).
func BindEnv(fs *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("daemon: no flag --%s to bind", name)
		}
		env := EnvName(name)
		v, ok := os.LookupEnv(env)
		if !ok || v == "" || f.Changed {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			if f.Value.Type() == "bool" {
				// strconv.ParseBool's own message names neither choice.
				return fmt.Errorf("%s=%q (for --%s): want true or false", env, v, name)
			}
			return fmt.Errorf("%s=%q (for --%s): %w", env, v, name, err)
		}
		if err := fs.SetAnnotation(name, envAnnotation, []string{env}); err != nil {
			return err
		}
	}
	return nil
}

// FlagNames returns the names of fs's flags but help and version, for
// BindEnv: every daemon flag can be set from the environment, so that a
// systemd EnvironmentFile, docker run --env-file or a Kubernetes pod's env
// can carry a daemon's whole configuration.
func FlagNames(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "version" {
			names = append(names, f.Name)
		}
	})
	return names
}

// envAnnotation marks a flag BindEnv set from the environment; its value
// is the variable's name.
const envAnnotation = "phalanx-env"

// Origins returns, for each of the named flags that BindEnv set from the
// environment, where its value came from, as errors should say it:
// "PHALANX_TLS_CERT (environment)". Flags set on the command line or left
// at their default are not in it (security.Files.From).
func Origins(fs *pflag.FlagSet, names ...string) map[string]string {
	from := map[string]string{}
	for _, name := range names {
		if f := fs.Lookup(name); f != nil {
			if env := f.Annotations[envAnnotation]; len(env) == 1 {
				from[name] = env[0] + " (environment)"
			}
		}
	}
	return from
}

// TLSFlags defines the hop-credential flags --tls-ca, --tls-cert and
// --tls-key on fs, into files, and returns their names for BindEnv. coordctl
// and both daemons have them.
func TLSFlags(fs *pflag.FlagSet, files *security.Files) []string {
	fs.StringVar(&files.CA, security.FlagCA, "", "cluster CA certificate (PEM) for mutual TLS on the gRPC hops; with --tls-cert and --tls-key (env "+EnvName(security.FlagCA)+")")
	fs.StringVar(&files.Cert, security.FlagCert, "", "this process's certificate (PEM) from coordctl tls cert create (env "+EnvName(security.FlagCert)+")")
	fs.StringVar(&files.Key, security.FlagKey, "", "the certificate's private key (PEM) (env "+EnvName(security.FlagKey)+")")
	return []string{security.FlagCA, security.FlagCert, security.FlagKey}
}

// SecurityFlags defines a daemon's hop-security flags on fs: TLSFlags and
// --insecure-cluster, and returns their names for BindEnv.
func SecurityFlags(fs *pflag.FlagSet, files *security.Files, insecureCluster *bool) []string {
	names := TLSFlags(fs, files)
	fs.BoolVar(insecureCluster, security.FlagInsecureCluster, false,
		"run without mutual TLS on a non-loopback --grpc-addr or --gossip-addr, or without --gossip-key-file on a non-loopback --gossip-addr (without TLS anyone who reaches --grpc-addr may run plans; without a gossip key anyone who reaches --gossip-addr may join and read the membership); warns at start and every run (env "+EnvName(security.FlagInsecureCluster)+")")
	return append(names, security.FlagInsecureCluster)
}

// LoadSecurity loads a daemon's hop credentials for role from files
// (security.LoadFiles: all three or none) and sets InsecureCluster.
func LoadSecurity(role security.Role, files security.Files, insecureCluster bool) (security.Config, error) {
	cfg, err := security.LoadFiles(role, files)
	if err != nil {
		return security.Config{}, err
	}
	cfg.InsecureCluster = insecureCluster
	return cfg, nil
}

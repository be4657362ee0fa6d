package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/security"
)

// File names `coordctl tls` writes (and reads the CA from by default), as
// `consul tls` names consul-agent-ca.pem and dc1-server-consul-0.pem.
const (
	caCertFile = "phalanx-ca.pem"
	caKeyFile  = "phalanx-ca-key.pem"
)

// leafFiles returns the certificate and key file names of a role's
// certificate for name: phalanx-ROLE-NAME.pem and phalanx-ROLE-NAME-key.pem.
func leafFiles(role security.Role, name string) (cert, key string) {
	base := "phalanx-" + role.String() + "-" + name
	return base + ".pem", base + "-key.pem"
}

// newTLSCmd is `coordctl tls`: the cluster's certificate tooling, as
// `consul tls ca create` and `nomad tls cert create`.
func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the cluster's CA and its agents', coordinators' and clients' certificates (mutual TLS)",
	}
	ca := &cobra.Command{Use: "ca", Short: "The cluster's certificate authority"}
	ca.AddCommand(newTLSCACreateCmd())
	cert := &cobra.Command{Use: "cert", Short: "Certificates of the cluster's agents, coordinators and clients"}
	cert.AddCommand(newTLSCertCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

func newTLSCACreateCmd() *cobra.Command {
	var (
		dir   string
		days  int
		force bool
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make a CA: " + caCertFile + " (give it to every member as --tls-ca) and " + caKeyFile + " (keep it secret, off the cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if days <= 0 {
				return &usageError{fmt.Errorf("--days %d: want a positive number of days", days)}
			}
			certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
			if err := refuseExisting(force, certPath, keyPath); err != nil {
				return err
			}
			ca, err := security.NewCA(time.Duration(days) * 24 * time.Hour)
			if err != nil {
				return err
			}
			keyPEM, err := ca.KeyPEM()
			if err != nil {
				return err
			}
			if err := writeFiles(force, certPath, ca.CertPEM, keyPath, keyPEM); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "==> CA %q, valid until %s\n", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.DateOnly))
			fmt.Fprintf(out, "==> wrote %s (CA certificate: every agent, coordinator and coordctl gets it as --tls-ca)\n", certPath)
			fmt.Fprintf(out, "==> wrote %s (CA key: it signs certificates; keep it secret, off the cluster's hosts)\n", keyPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", ".", "directory to write the files into")
	f.IntVar(&days, "days", int(security.DefaultCALifetime/(24*time.Hour)), "days the CA is valid")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func newTLSCertCreateCmd() *cobra.Command {
	var (
		roleName, name, dir string
		caFile, caKey       string
		ips, dnsNames       []string
		days                int
		force               bool
	)
	cmd := &cobra.Command{
		Use:   "create --role agent|coordinator|client --name NAME",
		Short: "Issue a certificate and key signed by the CA: phalanx-ROLE-NAME.pem and phalanx-ROLE-NAME-key.pem",
		Long: `create issues a certificate of one role, signed by the CA (--ca, --ca-key),
with a new ECDSA P-256 key. The role is the DNS name ROLE.phalanx in the
certificate, with its extended key usage: agent (serverAuth), coordinator
(serverAuth and clientAuth), client (clientAuth, for coordctl). Peers verify
the role, not the host's address; --ip and --dns add names for other tools.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if roleName == "" || name == "" {
				return &usageError{errors.New("--role and --name are required (see coordctl tls cert create --help)")}
			}
			role, err := security.ParseRole(roleName)
			if err != nil {
				return &usageError{fmt.Errorf("--role: %w", err)}
			}
			if err := security.ValidName(name); err != nil {
				return &usageError{fmt.Errorf("--name: %w", err)}
			}
			if days <= 0 {
				return &usageError{fmt.Errorf("--days %d: want a positive number of days", days)}
			}
			var addrs []net.IP
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return &usageError{fmt.Errorf("--ip %q: not an IP address", s)}
				}
				addrs = append(addrs, ip)
			}
			caCert, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("--ca: %w (coordctl tls ca create makes one)", err)
			}
			caKeyPEM, err := os.ReadFile(caKey)
			if err != nil {
				return fmt.Errorf("--ca-key: %w", err)
			}
			ca, err := security.ParseCA(caCert, caKeyPEM)
			if err != nil {
				return fmt.Errorf("--ca %s, --ca-key %s: %w", caFile, caKey, err)
			}
			certName, keyName := leafFiles(role, name)
			certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
			if err := refuseExisting(force, certPath, keyPath); err != nil {
				return err
			}
			certPEM, keyPEM, err := ca.Issue(security.CertRequest{
				Role: role, Name: name, IPs: addrs, DNSNames: dnsNames, Lifetime: time.Duration(days) * 24 * time.Hour,
			})
			if err != nil {
				return &usageError{err}
			}
			if err := writeFiles(force, certPath, certPEM, keyPath, keyPEM); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "==> %s certificate %q (%s), valid until %s\n", role, name, role.DNSName(), certNotAfter(certPEM))
			fmt.Fprintf(out, "==> wrote %s (certificate)\n", certPath)
			fmt.Fprintf(out, "==> wrote %s (private key: keep it secret)\n", keyPath)
			fmt.Fprintf(out, "==> use: --tls-ca %s --tls-cert %s --tls-key %s\n", caFile, certPath, keyPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&roleName, "role", "", "agent, coordinator or client (coordctl) (required)")
	f.StringVar(&name, "name", "", "the holder's name, e.g. the agent's --name (required)")
	f.StringSliceVar(&ips, "ip", nil, "IP addresses to add to the certificate, IP[,...]")
	f.StringSliceVar(&dnsNames, "dns", nil, "DNS names to add to the certificate, NAME[,...]")
	f.StringVar(&caFile, "ca", caCertFile, "CA certificate (PEM)")
	f.StringVar(&caKey, "ca-key", caKeyFile, "CA private key (PEM)")
	f.StringVar(&dir, "dir", ".", "directory to write the files into")
	f.IntVar(&days, "days", int(security.DefaultCertLifetime/(24*time.Hour)), "days the certificate is valid (never past the CA's end)")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

// refuseExisting fails, before anything is made, when a file exists and
// force is not set.
func refuseExisting(force bool, paths ...string) error {
	if force {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: not overwritten (--force overwrites it)", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeFiles writes a certificate and its key, mode 0600.
func writeFiles(force bool, certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	if err := security.WriteFile(keyPath, keyPEM, force); err != nil {
		return err
	}
	return security.WriteFile(certPath, certPEM, force)
}

// certNotAfter returns a PEM certificate's end date, as YYYY-MM-DD.
func certNotAfter(certPEM []byte) string {
	cfg, err := security.ParseCertificate(certPEM)
	if err != nil {
		return "?"
	}
	return cfg.NotAfter.UTC().Format(time.DateOnly)
}

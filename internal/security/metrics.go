package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// FlagMetricsAddr is the daemons' /metrics listen address flag.
const FlagMetricsAddr = "metrics-addr"

// CheckMetrics applies the safe default to a daemon's /metrics address
// (--metrics-addr), as Exposure.Check does to its gRPC and gossip ones:
// with mutual TLS the endpoint is served with it (MetricsTLS), wherever it
// listens; without, it is plain HTTP, which only a loopback address gets
// unless InsecureCluster, and then the warning (to log at start) says what
// is exposed. Errors: a malformed address; a network address without
// mutual TLS or InsecureCluster, naming the flag and the fixes.
func (cfg Config) CheckMetrics(addr string) (warning string, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--%s %q: %w", FlagMetricsAddr, addr, err)
	}
	loopback := cfg.Loopback
	if loopback == nil {
		loopback = IsLoopbackHost
	}
	if cfg.Mode == ModeMutualTLS || loopback(host) {
		return "", nil
	}
	risk := fmt.Sprintf("--%s %s serves /metrics in plaintext without authentication: anyone who reaches it may read the runs' metrics (run IDs, rates, latencies, agent names)", FlagMetricsAddr, addr)
	if !cfg.InsecureCluster {
		return "", fmt.Errorf("--%s %s is not a loopback address: /metrics on the network needs mutual TLS (--%s, --%s, --%s; a Prometheus with a client certificate of the cluster's CA scrapes it, README \"Prometheus metrics\"); on one host, give --%s 127.0.0.1:PORT; or --%s to serve it anyway, and then %s",
			FlagMetricsAddr, addr, FlagCA, FlagCert, FlagKey, FlagMetricsAddr, FlagInsecureCluster, risk)
	}
	return fmt.Sprintf("insecure cluster (--%s): %s", FlagInsecureCluster, risk), nil
}

// MetricsTLS returns the TLS configuration of a daemon's /metrics server
// in ModeMutualTLS, nil in ModeInsecure: the daemon's own certificate
// (so a scraper verifies the server name ROLE.phalanx), TLS 1.3, and a
// client certificate required, verified against the cluster's CA and
// checked to be of the client role (coordctl tls cert create --role
// client), the role of every tool outside the cluster. A refused
// certificate fails the handshake.
func (cfg Config) MetricsTLS() (*tls.Config, error) {
	if cfg.Mode == ModeInsecure {
		return nil, nil
	}
	c, err := cfg.creds()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.pool,
		MinVersion:   tls.VersionTLS13,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 {
				return errors.New("no verified client certificate")
			}
			leaf := chains[0][0]
			role, err := RoleOf(leaf)
			if err != nil {
				return err
			}
			if role != RoleClient {
				return fmt.Errorf("certificate %q has role %s; /metrics accepts only role %s", leaf.Subject.CommonName, role, RoleClient)
			}
			return nil
		},
	}, nil
}

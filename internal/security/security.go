package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Mode is how a gRPC hop is secured.
type Mode int

const (
	// ModeInsecure is plaintext gRPC with no peer authentication: the
	// zero Mode, for loopback (and for a network under --insecure-cluster).
	ModeInsecure Mode = iota
	// ModeMutualTLS is TLS 1.3 where both peers present a certificate of
	// the cluster's CA and each checks the other's role (package doc).
	ModeMutualTLS
)

// String returns the mode's name, as logs show it: "insecure", "mutual-tls".
func (m Mode) String() string {
	switch m {
	case ModeInsecure:
		return "insecure"
	case ModeMutualTLS:
		return "mutual-tls"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Flag names of the hop credentials, the same on agent, coordinator and
// coordctl.
const (
	FlagCA              = "tls-ca"
	FlagCert            = "tls-cert"
	FlagKey             = "tls-key"
	FlagInsecureCluster = "insecure-cluster"
	// FlagGossipKeyFile is the daemons' gossip key file (internal/cluster),
	// which Exposure asks for on a network gossip address.
	FlagGossipKeyFile = "gossip-key-file"
)

// Config says how the gRPC hops of one process are secured. The zero
// Config is ModeInsecure; LoadFiles and NewTLS return ModeMutualTLS ones.
type Config struct {
	// Mode selects the credentials. Default (zero) ModeInsecure.
	Mode Mode
	// Role is this process's role, which decides whom its server accepts
	// and whom it dials (package doc). Set by LoadFiles and NewTLS;
	// RoleNone in ModeInsecure.
	Role Role
	// InsecureCluster allows ModeInsecure on an address that is not
	// loopback (--insecure-cluster); the daemon then warns at start and at
	// every run. Default false: such a daemon refuses to start (Exposure).
	InsecureCluster bool
	// Loopback reports whether a listen address's host is loopback, for
	// Exposure. Default (nil): IsLoopbackHost. Tests set it to treat a
	// 127.x address as a network one.
	Loopback func(host string) bool

	tls *tlsCreds // ModeMutualTLS: the loaded credentials
}

// tlsCreds are the loaded mutual-TLS credentials of one process.
type tlsCreds struct {
	pool *x509.CertPool  // the cluster's CA
	cert tls.Certificate // this process's certificate and key
}

// Files names the PEM files of mutual TLS, as --tls-ca, --tls-cert and
// --tls-key give them.
type Files struct {
	// CA is the cluster's CA certificate (one or more CERTIFICATE blocks).
	CA string
	// Cert is this process's certificate; more CERTIFICATE blocks may
	// follow it (intermediates).
	Cert string
	// Key is the certificate's private key (PKCS #8, SEC 1 or PKCS #1).
	Key string
	// From says where each was given, by flag name (FlagCA, FlagCert,
	// FlagKey), for errors: e.g. "PHALANX_TLS_CERT (environment)". A name
	// not in it was given by its flag ("--tls-cert").
	From map[string]string
}

// source returns where the file of flag was given: From's entry, else the
// flag ("--tls-cert").
func (f Files) source(flag string) string {
	if s := f.From[flag]; s != "" {
		return s
	}
	return "--" + flag
}

// Empty reports whether no file is named.
func (f Files) Empty() bool { return f.CA == "" && f.Cert == "" && f.Key == "" }

// LoadFiles loads mutual-TLS credentials for a process of the given role
// from f, once: a Config in ModeMutualTLS. With no file named it returns
// the insecure zero Config. Verification is all or nothing (the lesson of
// hashicorp/consul#5069): naming some files but not all is an error that
// names the missing flags, never a fall-back to plaintext. Errors name the
// flag and file at fault: unreadable, no PEM, a key that is not the
// certificate's, a certificate the CA did not sign or that has expired, or
// one of another role.
func LoadFiles(role Role, f Files) (Config, error) {
	if f.Empty() {
		return Config{}, nil
	}
	var missing, given []string
	for _, x := range []struct{ flag, file string }{{FlagCA, f.CA}, {FlagCert, f.Cert}, {FlagKey, f.Key}} {
		if x.file == "" {
			missing = append(missing, "--"+x.flag)
		} else {
			given = append(given, f.source(x.flag)+" "+x.file)
		}
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("mutual TLS needs --%s, --%s and --%s together: %s missing, given only %s (no plaintext fall-back)",
			FlagCA, FlagCert, FlagKey, strings.Join(missing, " and "), strings.Join(given, " and "))
	}
	read := func(flag, file string) ([]byte, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.source(flag), err)
		}
		return b, nil
	}
	ca, err := read(FlagCA, f.CA)
	if err != nil {
		return Config{}, err
	}
	cert, err := read(FlagCert, f.Cert)
	if err != nil {
		return Config{}, err
	}
	key, err := read(FlagKey, f.Key)
	if err != nil {
		return Config{}, err
	}
	cfg, err := newTLS(role, ca, cert, key, f.source)
	if err != nil {
		var fe *fileError
		if errors.As(err, &fe) {
			file := map[string]string{FlagCA: f.CA, FlagCert: f.Cert, FlagKey: f.Key}[fe.flag]
			return Config{}, fmt.Errorf("%s %s: %w", f.source(fe.flag), file, fe.err)
		}
		return Config{}, err
	}
	return cfg, nil
}

// certTime is how errors give a certificate's validity bounds.
const certTime = "2006-01-02 15:04:05 UTC"

// fileError is a credential error blamed on one of the three inputs.
type fileError struct {
	flag string
	err  error
}

func (e *fileError) Error() string { return "--" + e.flag + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// NewTLS makes a ModeMutualTLS Config for a process of the given role from
// PEM data: the cluster's CA, this process's certificate and its key. Its
// errors are LoadFiles's, naming the flag whose data is at fault.
func NewTLS(role Role, caPEM, certPEM, keyPEM []byte) (Config, error) {
	return newTLS(role, caPEM, certPEM, keyPEM, Files{}.source)
}

// newTLS is NewTLS; source names where a flag's input came from, in
// messages about another input.
func newTLS(role Role, caPEM, certPEMBytes, keyPEMBytes []byte, source func(flag string) string) (Config, error) {
	if role.ExtKeyUsage() == nil {
		return Config{}, fmt.Errorf("mutual TLS for role %v: want agent, coordinator or client", role)
	}
	pool := x509.NewCertPool()
	var cas []*x509.Certificate
	for rest := caPEM; ; {
		c, r, err := nextCert(rest)
		if err != nil {
			return Config{}, &fileError{FlagCA, err}
		}
		if c == nil {
			break
		}
		if !c.IsCA {
			return Config{}, &fileError{FlagCA, fmt.Errorf("certificate %q is not a CA", c.Subject.CommonName)}
		}
		pool.AddCert(c)
		cas = append(cas, c)
		rest = r
	}
	if len(cas) == 0 {
		return Config{}, &fileError{FlagCA, errors.New("no PEM CERTIFICATE block")}
	}
	if _, err := parseCert(certPEMBytes); err != nil {
		return Config{}, &fileError{FlagCert, err}
	}
	if _, err := parseKey(keyPEMBytes); err != nil {
		return Config{}, &fileError{FlagKey, err}
	}
	pair, err := tls.X509KeyPair(certPEMBytes, keyPEMBytes)
	if err != nil {
		// crypto/tls's messages name no key material.
		return Config{}, &fileError{FlagKey, fmt.Errorf("not the key of the %s certificate: %w", source(FlagCert), err)}
	}
	leaf := pair.Leaf
	// Said first, in the operator's terms, rather than as x509's
	// "certificate has expired or is not yet valid" behind the CA check.
	if now := time.Now(); now.After(leaf.NotAfter) {
		return Config{}, &fileError{FlagCert, fmt.Errorf("certificate %q expired on %s; issue a new one (coordctl tls cert create --role %s --name %s)",
			leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(certTime), role, leaf.Subject.CommonName)}
	} else if now.Before(leaf.NotBefore) {
		return Config{}, &fileError{FlagCert, fmt.Errorf("certificate %q is not valid before %s (is this host's clock right?)",
			leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(certTime))}
	}
	if _, err := leaf.Verify(verifyOptions(pool, pair.Certificate[1:])); err != nil {
		return Config{}, &fileError{FlagCert, fmt.Errorf("not valid under the %s CA: %w", source(FlagCA), err)}
	}
	got, err := RoleOf(leaf)
	if err != nil {
		return Config{}, &fileError{FlagCert, err}
	}
	if got != role {
		return Config{}, &fileError{FlagCert, fmt.Errorf("certificate %q has role %s; the %s needs one of role %s (coordctl tls cert create --role %s)",
			leaf.Subject.CommonName, got, role, role, role)}
	}
	return Config{Mode: ModeMutualTLS, Role: role, tls: &tlsCreds{pool: pool, cert: pair}}, nil
}

// nextCert returns the next CERTIFICATE of PEM data and the rest, or nil
// at the end.
func nextCert(data []byte) (*x509.Certificate, []byte, error) {
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			return nil, nil, nil
		}
		data = rest
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, err
		}
		return c, data, nil
	}
}

// verifyOptions verifies a chain to pool for any usage: usages are checked
// apart, so that a certificate of the wrong use is told apart (and refused
// with PermissionDenied) from an untrusted one.
func verifyOptions(pool *x509.CertPool, intermediates [][]byte) x509.VerifyOptions {
	opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if len(intermediates) > 0 {
		opts.Intermediates = x509.NewCertPool()
		for _, der := range intermediates {
			if c, err := x509.ParseCertificate(der); err == nil {
				opts.Intermediates.AddCert(c)
			}
		}
	}
	return opts
}

// credentials returns cfg's TLS credentials, or an error for a
// ModeMutualTLS Config not made by LoadFiles or NewTLS.
func (cfg Config) creds() (*tlsCreds, error) {
	if cfg.tls == nil {
		return nil, errors.New("security: mutual TLS without credentials (use LoadFiles or NewTLS)")
	}
	return cfg.tls, nil
}

// ServerOptions returns the options that secure a gRPC server of cfg's
// process (the coordinator's for coordctl, an agent's for the
// coordinator): its credentials and, in ModeMutualTLS, the tap handle
// (grpc.InTapHandle, before the method is looked up or the message read)
// that refuses every call of a peer without a certificate of the CA
// (codes.Unauthenticated) or of a role that may not call this server
// (codes.PermissionDenied), logging each refusal and failed handshake on
// log with the peer's address and the reason. It fails on an unknown Mode
// and for a client, which serves nothing.
func (cfg Config) ServerOptions(log *slog.Logger) ([]grpc.ServerOption, error) {
	switch cfg.Mode {
	case ModeInsecure:
		return []grpc.ServerOption{grpc.Creds(insecure.NewCredentials())}, nil
	case ModeMutualTLS:
	default:
		return nil, fmt.Errorf("security: unknown mode %v", cfg.Mode)
	}
	c, err := cfg.creds()
	if err != nil {
		return nil, err
	}
	callers := cfg.Role.callers()
	if len(callers) == 0 {
		return nil, fmt.Errorf("security: a %s serves no gRPC", cfg.Role)
	}
	if log == nil {
		log = slog.Default()
	}
	g := &gate{role: cfg.Role, callers: callers, pool: c.pool, log: log}
	tc := &loggedCreds{
		TransportCredentials: credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{c.cert},
			// Asked for but verified by the gate, so that a refusal is a
			// gRPC status (Unauthenticated, PermissionDenied) the peer
			// can read, not a broken handshake. crypto/tls still checks
			// that the peer holds the key of the certificate it sends.
			ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS13,
		}),
		log: log,
	}
	return []grpc.ServerOption{
		grpc.Creds(tc),
		// The gate is the tap handle, which runs as a call's headers
		// arrive: before its method is looked up and before its message
		// is read. As an interceptor it ran after the generated handler
		// had decoded the message, so a stranger's malformed message got
		// Internal and an unknown method Unimplemented, neither logged.
		// The tap runs on the connection's reading goroutine; admit only
		// verifies the certificate already received, without I/O.
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			if err := g.admit(ctx, info.FullMethodName); err != nil {
				return nil, err
			}
			return ctx, nil
		}),
	}, nil
}

// DialOption returns the grpc.DialOption that sets a client connection's
// credentials: coordctl's to the coordinator, the coordinator's to an
// agent. In ModeMutualTLS it presents cfg's certificate and verifies the
// server's against the CA and its role by name (ServerName
// "coordinator.phalanx" for a client, "agent.phalanx" for a coordinator),
// TLS 1.3 minimum. It fails on an unknown Mode and for an agent, which dials
// no one.
func (cfg Config) DialOption() (grpc.DialOption, error) {
	return cfg.dialOption(cfg.Role.dials())
}

// DialOptionTo returns the grpc.DialOption of a dial to a server of role
// peer: DialOption's, verifying peer's role instead of the one cfg's role
// usually dials. A coordinator dials another coordinator with it (the
// cluster-wide keyring operations); the peer's server must accept cfg's
// role (a coordinator accepts the coordinator role).
func (cfg Config) DialOptionTo(peer Role) (grpc.DialOption, error) {
	return cfg.dialOption(peer)
}

func (cfg Config) dialOption(peerRole Role) (grpc.DialOption, error) {
	switch cfg.Mode {
	case ModeInsecure:
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	case ModeMutualTLS:
	default:
		return nil, fmt.Errorf("security: unknown mode %v", cfg.Mode)
	}
	c, err := cfg.creds()
	if err != nil {
		return nil, err
	}
	if peerRole == RoleNone {
		return nil, fmt.Errorf("security: a %s dials no gRPC server", cfg.Role)
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{c.cert},
		RootCAs:      c.pool,
		ServerName:   peerRole.DNSName(),
		MinVersion:   tls.VersionTLS13,
	})), nil
}

// gate admits the calls of a mutual-TLS server.
type gate struct {
	role    Role   // the server's
	callers []Role // roles that may call it
	pool    *x509.CertPool
	log     *slog.Logger
}

// admit returns nil when the peer of ctx may call method, else a status
// error (Unauthenticated or PermissionDenied) that it also logs.
func (g *gate) admit(ctx context.Context, method string) error {
	code, reason := g.check(ctx)
	if code == codes.OK {
		return nil
	}
	addr := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	g.log.Warn("refused a gRPC call", "peer", addr, "method", method, "code", code.String(), "reason", reason)
	return status.Errorf(code, "%s refused the call: %s", g.role, reason)
}

// check verifies the peer's certificate: the reason it is refused, with
// codes.OK when it is not.
func (g *gate) check(ctx context.Context) (codes.Code, string) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return codes.Unauthenticated, "no peer information"
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return codes.Unauthenticated, "not a TLS connection"
	}
	certs := ti.State.PeerCertificates
	if len(certs) == 0 {
		return codes.Unauthenticated, fmt.Sprintf("no client certificate (mutual TLS: give --%s and --%s)", FlagCert, FlagKey)
	}
	leaf := certs[0]
	var inter [][]byte
	for _, c := range certs[1:] {
		inter = append(inter, c.Raw)
	}
	if _, err := leaf.Verify(verifyOptions(g.pool, inter)); err != nil {
		return codes.Unauthenticated, fmt.Sprintf("certificate %q is not valid under this cluster's CA: %v", leaf.Subject.CommonName, err)
	}
	role, err := RoleOf(leaf)
	if err != nil {
		return codes.PermissionDenied, err.Error()
	}
	allowed := false
	for _, r := range g.callers {
		allowed = allowed || r == role
	}
	if !allowed {
		return codes.PermissionDenied, fmt.Sprintf("certificate %q has role %s; the %s accepts only role %s",
			leaf.Subject.CommonName, role, g.role, joinRoles(g.callers))
	}
	if !hasUsage(leaf, x509.ExtKeyUsageClientAuth) {
		return codes.PermissionDenied, fmt.Sprintf("certificate %q (role %s) is not for client authentication", leaf.Subject.CommonName, role)
	}
	return codes.OK, ""
}

// loggedCreds logs the server handshakes that fail (a plaintext client, an
// old TLS version, a certificate without its key), which never reach the
// gate.
type loggedCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (c *loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.log.Warn("refused a connection: TLS handshake failed", "peer", conn.RemoteAddr().String(), "reason", err.Error())
	}
	return out, info, err
}

func (c *loggedCreds) Clone() credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

package security

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
)

// Role is what a certificate's holder is in the cluster.
type Role int

const (
	// RoleNone is no role: the zero Role, a process without certificate.
	RoleNone Role = iota
	// RoleAgent is an agent: it serves AgentService to the coordinator.
	RoleAgent
	// RoleCoordinator is a coordinator: it serves CoordinatorService to
	// coordctl and dials agents.
	RoleCoordinator
	// RoleClient is coordctl (or another client of the coordinator).
	RoleClient
)

// RoleDomain is the DNS suffix of role names: a certificate of role R
// carries the DNS SAN R + "." + RoleDomain ("agent.phalanx"), as Nomad's
// certificates carry "server.global.nomad".
const RoleDomain = "phalanx"

// Roles lists the roles a certificate may have, in the order coordctl tls
// cert create --role lists them.
var Roles = []Role{RoleAgent, RoleCoordinator, RoleClient}

// String returns the role's name: "agent", "coordinator", "client" (or
// "none").
func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleAgent:
		return "agent"
	case RoleCoordinator:
		return "coordinator"
	case RoleClient:
		return "client"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole parses "agent", "coordinator" or "client"; any other name is
// an error listing the valid ones.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if strings.EqualFold(s, r.String()) {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q: want agent, coordinator or client", s)
}

// DNSName returns the role's name in certificates: "agent.phalanx",
// "coordinator.phalanx", "client.phalanx".
func (r Role) DNSName() string { return r.String() + "." + RoleDomain }

// ExtKeyUsage returns the extended key usages a certificate of the role
// gets: serverAuth for an agent, serverAuth and clientAuth for a
// coordinator, clientAuth for a client.
func (r Role) ExtKeyUsage() []x509.ExtKeyUsage {
	switch r {
	case RoleAgent:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case RoleCoordinator:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case RoleClient:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return nil
}

// callers returns the roles whose certificates r's server accepts: client
// and coordinator for a coordinator, coordinator for an agent; none for a
// client, which serves nothing.
func (r Role) callers() []Role {
	switch r {
	case RoleCoordinator:
		return []Role{RoleClient, RoleCoordinator}
	case RoleAgent:
		return []Role{RoleCoordinator}
	}
	return nil
}

// dials returns the role of the servers r dials: the coordinator for a
// client, agents for a coordinator; RoleNone for an agent, which dials no
// one.
func (r Role) dials() Role {
	switch r {
	case RoleClient:
		return RoleCoordinator
	case RoleCoordinator:
		return RoleAgent
	}
	return RoleNone
}

// RoleOf returns the role of cert: the one role name among its DNS SANs.
// A certificate with no role name, or with several, is an error.
func RoleOf(cert *x509.Certificate) (Role, error) {
	found := RoleNone
	for _, name := range cert.DNSNames {
		for _, r := range Roles {
			if !strings.EqualFold(name, r.DNSName()) {
				continue
			}
			if found != RoleNone && found != r {
				return RoleNone, fmt.Errorf("certificate %q has several roles (%s and %s)", cert.Subject.CommonName, found, r)
			}
			found = r
		}
	}
	if found == RoleNone {
		return RoleNone, fmt.Errorf("certificate %q has no role (no DNS name agent.%s, coordinator.%s or client.%s)",
			cert.Subject.CommonName, RoleDomain, RoleDomain, RoleDomain)
	}
	return found, nil
}

// hasUsage reports whether cert may be used for u (an empty extended key
// usage list, or ExtKeyUsageAny, allows any use, as crypto/x509 treats it).
func hasUsage(cert *x509.Certificate, u x509.ExtKeyUsage) bool {
	return len(cert.ExtKeyUsage) == 0 && len(cert.UnknownExtKeyUsage) == 0 ||
		slices.Contains(cert.ExtKeyUsage, u) || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// joinRoles returns "client or coordinator".
func joinRoles(rs []Role) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.String()
	}
	return strings.Join(names, " or ")
}

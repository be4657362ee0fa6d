// Package security is the one home of the cluster's hop credentials: the
// transport credentials of every gRPC hop (coordctl to coordinator,
// coordinator to agent, dial side and server side), the certificates they
// use, and the safe-default rule that keeps a daemon on the network from
// running unauthenticated by accident.
//
// Two modes: ModeInsecure (plaintext gRPC, the zero Config: for loopback,
// or a network under --insecure-cluster) and ModeMutualTLS (TLS 1.3, both
// peers present a certificate of the cluster's CA; LoadFiles loads one from
// --tls-ca, --tls-cert and --tls-key).
//
// Roles. A certificate's role is a DNS subject alternative name
// "ROLE.phalanx" (RoleAgent "agent.phalanx", RoleCoordinator
// "coordinator.phalanx", RoleClient "client.phalanx"), in the manner of
// Nomad's "server.global.nomad"; its extended key usage says how it may be
// used: an agent's serverAuth (agents only serve), a coordinator's serverAuth
// and clientAuth (it serves coordctl and dials agents), a client's clientAuth.
// A dialer verifies the server's role by TLS name verification (coordctl
// dials ServerName "coordinator.phalanx", the coordinator dials
// "agent.phalanx"), so no certificate needs the hosts' addresses. A server
// accepts a call only from a peer whose certificate chains to the CA
// (else codes.Unauthenticated) and whose role may call it, with clientAuth
// (else codes.PermissionDenied): the coordinator's server accepts client and
// coordinator, an agent's server only coordinator. Refusals are logged by
// the refusing daemon with the peer's address and the reason, never any key
// material.
//
// CA and Issue make the certificates (ECDSA P-256, crypto/x509) behind
// `coordctl tls ca create` and `coordctl tls cert create`.
//
// Exposure is the safe default: a daemon whose gRPC or gossip address is not
// loopback refuses to start without mutual TLS, and one whose gossip address
// is not loopback without a gossip key too (--gossip-key-file: mutual TLS
// does not cover memberlist's gossip), unless --insecure-cluster is given.
//
// The load's own TLS (the plan's --cacert/--cert/--key towards the target)
// is internal/engine's, not this package's.
package security

// Package daemon holds what the agent and coordinator main packages share:
// logger construction from flags, the signal-driven run context (the first
// SIGINT/SIGTERM stops gracefully; a second exits at once), and the
// hop-security flags (--tls-ca, --tls-cert, --tls-key, --insecure-cluster;
// coordctl shares the first three) with their PHALANX_* environment
// variables.
package daemon

// Package daemon holds what the agent and coordinator main packages share:
// logger construction from flags and the signal-driven run context (the
// first SIGINT/SIGTERM stops gracefully; a second exits at once).
package daemon

// Package tlsgen owns throwaway TLS material for tests and demos: it
// generates, entirely in memory, a self-signed test certificate authority
// and a server leaf certificate signed by it (ECDSA P-256 keys).
//
// Clients trust the CA (Bundle.CAPEM or Bundle.CAPool), never the leaf,
// so the material exercises the same chain verification a real deployment
// does. Nothing generated here is meant to outlive a test run: validity is
// one hour in the past to 24 hours in the future, and keys are never
// persisted unless Bundle.WriteFiles is called.
package tlsgen

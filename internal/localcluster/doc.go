// Package localcluster starts a whole Phalanx cluster inside one process on
// loopback: a coordinator and n agents with real gRPC servers and real
// memberlist gossip. It backs `coordctl demo` and the in-process end-to-end
// tests; it owns only their lifecycle.
package localcluster

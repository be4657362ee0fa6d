// Package target owns Phalanx's built-in HTTPS target server: a minimal,
// fixed-response server used by the `coordctl demo` command and by tests as
// a load-test target on loopback.
//
// Every request, whatever its method or path, gets the same 200 response
// with a fixed body, and the server counts requests and accepted
// connections exactly, so tests can compare what a load generator reports
// with what the target actually saw.
//
// With Config.HTTP3 it also serves HTTP/3 (quic-go's http3.Server) on the
// UDP port of the same number as its TCP port, with the same handler and
// counts (QUICConnections counts its QUIC connections).
//
// With Config.Workers and Config.ServiceTime it is a modelled server
// (model.go): a FIFO queue with that many servers of a fixed service time,
// whose capacity (Workers/ServiceTime) and latency under load are known in
// advance, for tests that must find them (the capacity search).
package target

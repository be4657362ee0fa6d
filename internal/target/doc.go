// Package target owns Phalanx's built-in HTTPS target server: a minimal,
// fixed-response server used by the `coordctl demo` command and by tests as
// a load-test target on loopback.
//
// Every request, whatever its method or path, gets the same 200 response
// with a fixed body, and the server counts requests and accepted
// connections exactly, so tests can compare what a load generator reports
// with what the target actually saw.
package target

// Package nginxtest owns a test fixture that runs a private NGINX for
// end-to-end tests: Start launches Debian's nginx binary as a child process
// with a generated configuration, a throwaway tlsgen certificate and a
// static page, all inside the test's temporary directory, listening with TLS
// on 127.0.0.1 only, and stops it when the test ends.
//
// The fixture never reads or changes the system NGINX configuration, logs,
// pid file or service. Its access log uses a fixed format (LogFormat) that
// records the connection serial number, the request number on that
// connection, TLS session reuse and protocol, so tests can check what a
// load generator really did on the wire (keep-alive, resumption, HTTP/2).
//
// If nginx is not installed, Start skips the test, unless the environment
// variable PHALANX_REQUIRE_NGINX is "1", in which case it fails it.
package nginxtest

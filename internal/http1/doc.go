// Package http1 owns the HTTP/1.1 response parser of the load engine
// (RFC 9112): ReadResponse reads one whole response from a bufio.Reader,
// counting its wire bytes, and allocates nothing in steady state (a line
// longer than the reader's buffer is gathered in a buffer the Response
// keeps, up to MaxLine; a header section is bounded by MaxHeaderBytes). It is
// pure (no connections, no clocks beyond stamping the first byte) and
// fuzzed (FuzzReadResponse). Connections, request writing and error
// classification stay in internal/engine.
package http1

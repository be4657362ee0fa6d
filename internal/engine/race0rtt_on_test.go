//go:build race

package engine

import "testing"

// skip0RTTUnderRace skips a test that sends HTTP/3 in 0-RTT when built
// with the race detector: quic-go v0.65.0 writes the server's transport
// parameters on its connection's goroutine while a stream opened in 0-RTT
// reads them (quic-go issue 4303, open), which the detector reports.
// make test runs these tests again without it.
func skip0RTTUnderRace(t *testing.T) {
	t.Helper()
	t.Skip("quic-go races on the peer's transport parameters when a stream opens in 0-RTT (quic-go issue 4303): run without -race")
}

// Package engine generates HTTP load for one share of a plan and measures it.
//
// An Engine owns its workers (each with a recorder, a TLS session cache and
// a schedule), its connection slots and its clock. It opens and handshakes
// every connection in Prepare, starts all of them at one instant in Run,
// and hands the caller one Interval per reporting interval, aligned to the
// start instant: interval k covers [start+k·i, start+(k+1)·i).
//
// Two seams keep protocols and load models apart from the run loop:
//
//   - A slot (connSlot, slot.go) is one connection the engine runs: an
//     HTTP/1.1 connection (conn.go; the response parser is internal/http1)
//     or an HTTP/2 connection slot carrying up to MaxStreams stream slots
//     (h2.go), which opens and reopens its connection, the h2session
//     (h2session.go: framer, reader, flusher, flow control, GOAWAY), or
//     an HTTP/3 connection over QUIC (h3.go) carrying up to MaxStreams
//     stream slots (h3mux.go). A new protocol is one more slot type.
//   - A pacer (pacer.go) decides when a slot sends, over the worker's pure
//     schedule (schedule.go: the target over time, its integral and the
//     integral's inverse). Closed loop: each active slot sends its next
//     request when the previous one ends (wrk's model), and stages ramp the
//     number of active slots; latency runs from the request's first written
//     byte. Open loop: sends follow the schedule's rate (wrk2's -R), slots
//     take numbered tickets, latency runs from each request's intended send
//     time, every send's lateness (actual − intended) is recorded in the
//     Lateness histogram, a send that starts more than MissThreshold late
//     counts as missed, and HTTP/1.1 slots are added up to MaxConnections when every
//     one is busy.
//
// Each request ends in exactly one outcome, a status code or an error kind,
// and issued = completed + errors + in-flight at the window's end. Every
// goroutine the engine starts has an owner that joins it: Run joins the
// slots' loops (and open-loop growth), a slot's loop its stream slots, and
// a slot its sessions' reader and flusher (on its loop's end and on Close).
//
// The engine imports neither gRPC nor protobuf: the agent translates. How a
// run is stopped across the cluster is told in docs/design.md; here, ctx's
// end closes every connection at once and EndWindow ends the window early.
package engine

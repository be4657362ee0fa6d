// Package engine generates HTTP load for one share of a plan and measures it.
//
// An Engine owns its connections, its workers' recorders and its clock. It
// opens and handshakes every connection in Prepare, starts all of them at one
// instant in Run, and hands the caller one Interval per reporting interval,
// aligned to the start instant: interval k covers [start+k·i, start+(k+1)·i).
//
// Closed loop: each connection sends its next request when the previous one
// ends (wrk's model); latency runs from the request's first written byte to
// its last body byte. Each request ends in exactly one outcome, a status code
// or an error kind, and issued = completed + errors + in-flight at the
// window's end.
//
// The engine imports neither gRPC nor protobuf: the agent translates.
package engine

// Package security builds the transport credentials of every gRPC hop:
// coordctl to coordinator and coordinator to agent, dial side and server
// side. It is the one place where a hop's credentials are decided, so that
// mutual TLS is added here (a Config field and a Mode) without touching the
// daemons or the client.
//
// Today every hop is plaintext gRPC (ModeInsecure, the zero Config): the
// cluster is meant for a private network. It leaves the load's own TLS
// (the plan's --cert/--key towards the target) to internal/engine.
package security

package security

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Mode is how a gRPC hop is secured.
type Mode int

const (
	// ModeInsecure is plaintext gRPC with no peer authentication: the
	// default, and today the only mode.
	ModeInsecure Mode = iota
)

// String returns the mode's name, as logs show it.
func (m Mode) String() string {
	switch m {
	case ModeInsecure:
		return "insecure"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Config says how the gRPC hops of one process are secured. The zero
// Config is ModeInsecure.
type Config struct {
	// Mode selects the credentials. Default (zero) ModeInsecure.
	Mode Mode
}

// transport returns the transport credentials for cfg's mode, or an error
// naming an unknown mode.
func (cfg Config) transport() (credentials.TransportCredentials, error) {
	switch cfg.Mode {
	case ModeInsecure:
		return insecure.NewCredentials(), nil
	}
	return nil, fmt.Errorf("security: unknown mode %v", cfg.Mode)
}

// ServerOption returns the grpc.ServerOption that sets a gRPC server's
// credentials (the coordinator's for coordctl, an agent's for the
// coordinator). It fails on an unknown Mode.
func (cfg Config) ServerOption() (grpc.ServerOption, error) {
	tc, err := cfg.transport()
	if err != nil {
		return nil, err
	}
	return grpc.Creds(tc), nil
}

// DialOption returns the grpc.DialOption that sets a client connection's
// credentials (coordctl to the coordinator, the coordinator to an agent).
// It fails on an unknown Mode.
func (cfg Config) DialOption() (grpc.DialOption, error) {
	tc, err := cfg.transport()
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(tc), nil
}

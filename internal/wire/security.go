package wire

import (
	"github.com/phalanxload/phalanx/internal/security"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// SecurityToProto is the GrpcSecurity a member gossips for its hop
// credentials' mode; UNSPECIFIED for a mode it does not know.
func SecurityToProto(m security.Mode) pb.GrpcSecurity {
	switch m {
	case security.ModeInsecure:
		return pb.GrpcSecurity_GRPC_SECURITY_INSECURE
	case security.ModeMutualTLS:
		return pb.GrpcSecurity_GRPC_SECURITY_MUTUAL_TLS
	}
	return pb.GrpcSecurity_GRPC_SECURITY_UNSPECIFIED
}

// SecurityText names a gossiped GrpcSecurity as the daemons log their
// security mode ("insecure", "mutual-tls"); "?" for UNSPECIFIED (a member
// that does not gossip it).
func SecurityText(s pb.GrpcSecurity) string {
	switch s {
	case pb.GrpcSecurity_GRPC_SECURITY_INSECURE:
		return security.ModeInsecure.String()
	case pb.GrpcSecurity_GRPC_SECURITY_MUTUAL_TLS:
		return security.ModeMutualTLS.String()
	}
	return "?"
}
